/*
 * Arm semihosting (the debugger or QEMU `-semihosting-config enable=on,target=native`
 * does the I/O for the target): console output and the exit code of the run.
 *
 * Without a debugger or an emulator attached, a semihosting call stops the core on its
 * BKPT (HardFault on a board without a debugger): only the self-test build uses it.
 */
#ifndef SEMIHOSTING_H
#define SEMIHOSTING_H

#include <stdint.h>

/* SYS_WRITE0: writes a NUL-terminated string to the host's console. */
void sh_write0(const char *s);

/* Ends the run with `status` as the exit code of QEMU: 0 through SYS_EXIT with
 * ADP_Stopped_ApplicationExit (the A32/T32 form, which carries no status), anything
 * else through SYS_EXIT_EXTENDED { ADP_Stopped_ApplicationExit, status }; if the host
 * does not know SYS_EXIT_EXTENDED, SYS_EXIT with ADP_Stopped_RunTimeErrorUnknown (exit
 * code 1). Does not return. */
void sh_exit(int32_t status) __attribute__((noreturn));

/* A line-buffered console on top of sh_write0 (one host call per line). */
void out_str(const char *s);
void out_char(char c);
void out_u32(uint32_t v);            /* decimal */
void out_i32(int32_t v);             /* decimal, signed */
void out_hex(uint32_t v, unsigned digits); /* upper-case hex, `digits` wide */
void out_bytes(const uint8_t *b, uint32_t n); /* upper-case hex, two digits a byte */
void out_flush(void);

#endif /* SEMIHOSTING_H */
