/*
 * Skiff's pause: the process that holds a pod sandbox's namespaces.
 *
 * It blocks every signal and waits for them synchronously:
 *   SIGCHLD          -> reap every exited child (it is PID 1 when the pod
 *                       shares one PID namespace, so orphans land here);
 *   SIGTERM, SIGINT  -> exit 0;
 *   anything else    -> ignored.
 *
 * Freestanding on purpose: no libc (libc6-dev need not be installed), raw
 * system calls, a static binary of a few kilobytes. Built by build.rs.
 */

#if defined(__x86_64__)
#define SYS_rt_sigprocmask 14
#define SYS_wait4 61
#define SYS_rt_sigtimedwait 128
#define SYS_exit_group 231
#elif defined(__aarch64__)
#define SYS_rt_sigprocmask 135
#define SYS_rt_sigtimedwait 137
#define SYS_wait4 260
#define SYS_exit_group 94
#else
#error "pause.c supports x86_64 and aarch64 only"
#endif

#define SIG_BLOCK 0
#define SIGINT 2
#define SIGTERM 15
#define SIGCHLD 17
#define WNOHANG 1
#define WALL 0x40000000 /* __WALL: also children with another exit signal */
#define SIGSET_BYTES 8  /* the kernel's sigset_t: _NSIG (64) bits */

static long syscall4(long n, long a, long b, long c, long d) {
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
#else
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc #0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3)
                     : "memory");
    return x0;
#endif
}

__attribute__((noreturn)) static void exit_group(int code) {
    for (;;) {
        syscall4(SYS_exit_group, code, 0, 0, 0);
    }
}

__attribute__((noreturn, used)) void pause_main(void) {
    unsigned long all = ~0UL; /* the kernel quietly leaves out KILL and STOP */
    if (syscall4(SYS_rt_sigprocmask, SIG_BLOCK, (long)&all, 0, SIGSET_BYTES) < 0) {
        exit_group(1);
    }
    for (;;) {
        /* No siginfo, no timeout: wait for the next signal forever. */
        long sig = syscall4(SYS_rt_sigtimedwait, (long)&all, 0, 0, SIGSET_BYTES);
        if (sig == SIGTERM || sig == SIGINT) {
            exit_group(0);
        }
        if (sig == SIGCHLD) {
            /* One pending SIGCHLD may stand for many exits: reap until none. */
            while (syscall4(SYS_wait4, -1, 0, WNOHANG | WALL, 0) > 0) {
            }
        }
        /* EINTR, EAGAIN and other signals: wait again. */
    }
}

/* The entry point: align the stack as the C ABI wants, then never return. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "  xor %ebp, %ebp\n"
        "  and $-16, %rsp\n"
        "  call pause_main\n"
        "  hlt\n");
#else
__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "  mov x29, #0\n"
        "  mov x30, #0\n"
        "  bl pause_main\n"
        "  b .\n");
#endif
