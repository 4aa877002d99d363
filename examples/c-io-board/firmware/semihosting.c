/*
 * Arm semihosting for Cortex-M: a call is `BKPT 0xAB` with the operation in r0 and its
 * argument (a value or a pointer to a parameter block) in r1; the result comes back in
 * r0. See "Semihosting for AArch32 and AArch64", Arm, version 2.0.
 */
#include "semihosting.h"

#define SYS_WRITE0 0x04u
#define SYS_EXIT 0x18u
#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u
#define ADP_STOPPED_RUNTIME_ERROR_UNKNOWN 0x20023u

static uint32_t sh_call(uint32_t op, uint32_t arg)
{
    uint32_t ret;
    __asm__ volatile("mov r0, %1\n\t"
                     "mov r1, %2\n\t"
                     "bkpt 0xAB\n\t"
                     "mov %0, r0"
                     : "=r"(ret)
                     : "r"(op), "r"(arg)
                     : "r0", "r1", "memory");
    return ret;
}

void sh_write0(const char *s)
{
    (void)sh_call(SYS_WRITE0, (uint32_t)(uintptr_t)s);
}

void sh_exit(int32_t status)
{
    out_flush();
    if (status == 0) {
        (void)sh_call(SYS_EXIT, ADP_STOPPED_APPLICATION_EXIT);
    } else {
        const uint32_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, (uint32_t)status};
        (void)sh_call(SYS_EXIT_EXTENDED, (uint32_t)(uintptr_t)block);
        (void)sh_call(SYS_EXIT, ADP_STOPPED_RUNTIME_ERROR_UNKNOWN);
    }
    for (;;) {
        /* No host: stay here (a board's watchdog resets it). */
    }
}

static char line[160];
static uint32_t used;

void out_flush(void)
{
    if (used > 0) {
        line[used] = '\0';
        sh_write0(line);
        used = 0;
    }
}

void out_char(char c)
{
    if (used >= sizeof line - 1) {
        out_flush();
    }
    line[used++] = c;
    if (c == '\n') {
        out_flush();
    }
}

void out_str(const char *s)
{
    while (*s != '\0') {
        out_char(*s++);
    }
}

void out_u32(uint32_t v)
{
    char digits[10];
    unsigned n = 0;
    do {
        digits[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0u);
    while (n > 0u) {
        out_char(digits[--n]);
    }
}

void out_i32(int32_t v)
{
    if (v < 0) {
        out_char('-');
        out_u32(0u - (uint32_t)v);
    } else {
        out_u32((uint32_t)v);
    }
}

void out_hex(uint32_t v, unsigned digits)
{
    static const char hex[] = "0123456789ABCDEF";
    while (digits > 0u) {
        digits--;
        out_char(hex[(v >> (4u * digits)) & 0xFu]);
    }
}

void out_bytes(const uint8_t *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        out_hex(b[i], 2);
    }
}
