//! Streaming sub-protocols of exec, attach and port-forward.

/// Upgrading a connection to a node agent and splicing it to the client's.
pub mod proxy;
pub mod spdy;
/// WebSocket v5 exec/attach to SPDY, and SPDY tunnelled in a WebSocket.
pub mod translate;
/// WebSocket handshakes, subprotocols and the channel framing.
pub mod websocket;
