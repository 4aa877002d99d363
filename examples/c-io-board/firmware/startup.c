/*
 * Startup of the C I/O-board firmware on the MPS2-AN386 (Cortex-M4F): the vector table,
 * the reset handler and the default exception handlers.
 *
 * Reset: the core loads the stack pointer from word 0 of the table (__stack_top, the end
 * of RAM) and jumps to Reset_Handler, which
 *   1. enables the FPU (CPACR: CP10 and CP11 full access), in assembly and before any
 *      C code runs, since code built with -mfloat-abi=hard may use the FPU registers
 *      anywhere (a VPUSH in a prologue, a VMOV in a copy loop) and would fault on a
 *      disabled FPU;
 *   2. copies .data from its load image in flash to RAM and zeroes .bss;
 *   3. calls main.
 * No libc start files (crt0): nothing else needs initialising (no constructors, no
 * heap, no stdio).
 */
#include <stdint.h>

/* From mps2_an386.ld. */
extern uint32_t __stack_top;
extern uint32_t __data_start;
extern uint32_t __data_end;
extern const uint32_t __data_load;
extern uint32_t __bss_start;
extern uint32_t __bss_end;

int main(void);

void Reset_Handler(void) __attribute__((naked, noreturn));
void reset_c(void) __attribute__((noreturn, used));
void Default_Handler(void);

/* Weak: the application (or the self-test) may define any of these. */
void NMI_Handler(void) __attribute__((weak, alias("Default_Handler")));
void HardFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void MemManage_Handler(void) __attribute__((weak, alias("Default_Handler")));
void BusFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UsageFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SVC_Handler(void) __attribute__((weak, alias("Default_Handler")));
void DebugMon_Handler(void) __attribute__((weak, alias("Default_Handler")));
void PendSV_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SysTick_Handler(void) __attribute__((weak, alias("Default_Handler")));

/* The 16 system exceptions, then the 32 interrupts of the MPS2 (UARTs, timers,
 * Ethernet...; none is enabled by this firmware). */
#define IRQS 32

typedef void (*vector_t)(void);

#define IRQ8                                                                               \
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,   \
        Default_Handler, Default_Handler, Default_Handler

__attribute__((section(".vectors"), used)) static const vector_t vectors[16 + IRQS] = {
    (vector_t)(uintptr_t)&__stack_top,
    Reset_Handler,
    NMI_Handler,
    HardFault_Handler,
    MemManage_Handler,
    BusFault_Handler,
    UsageFault_Handler,
    0,
    0,
    0,
    0,
    SVC_Handler,
    DebugMon_Handler,
    0,
    PendSV_Handler,
    SysTick_Handler,
    IRQ8, IRQ8, IRQ8, IRQ8,
};

void Reset_Handler(void)
{
    __asm__ volatile("movw r0, #0xED88\n\t" /* CPACR = 0xE000ED88 */
                     "movt r0, #0xE000\n\t"
                     "ldr r1, [r0]\n\t"
                     "orr r1, r1, #0x00F00000\n\t" /* CP10, CP11: full access */
                     "str r1, [r0]\n\t"
                     "dsb\n\t"
                     "isb\n\t" /* the FPU is usable from the next instruction */
                     "b reset_c\n\t");
}

/* GCC turns these loops into memcpy and memset calls (-ftree-loop-distribute-patterns);
 * both are pure code (libfcan_node.a's compiler builtins provide them), safe to call
 * before .data and .bss are set up. */
void reset_c(void)
{
    uint32_t *dst = &__data_start;
    const uint32_t *src = &__data_load;
    while (dst < &__data_end) {
        *dst++ = *src++;
    }
    for (dst = &__bss_start; dst < &__bss_end; dst++) {
        *dst = 0;
    }
    (void)main();
    for (;;) {
        /* main does not return; if it does, stay here. */
    }
}

void Default_Handler(void)
{
    for (;;) {
        /* An unexpected exception: stop here (a board's watchdog resets it). */
    }
}
