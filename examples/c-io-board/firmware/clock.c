/*
 * SysTick as a free-running 24-bit down-counter at the core clock, polled: clock_now_us
 * adds the ticks elapsed since its last call. u32 arithmetic only. Under QEMU SysTick
 * follows the host's clock (QEMU is not cycle-accurate), so there it is wall time.
 */
#include "clock.h"

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define SYST_CSR_ENABLE 1u
#define SYST_CSR_CLKSOURCE_CORE 4u
#define RELOAD 0x00FFFFFFu
#define TICKS_PER_US (CLOCK_SYSCLK_HZ / 1000000u)

static uint32_t last;
static uint32_t rem;
static uint32_t us;
static int virtual_clock;

int clock_init(void)
{
    SYST_CSR = 0;
    SYST_RVR = RELOAD;
    SYST_CVR = 0; /* any write clears it; it reloads at the next tick */
    SYST_CSR = SYST_CSR_CLKSOURCE_CORE | SYST_CSR_ENABLE;
    uint32_t first = SYST_CVR;
    virtual_clock = 1;
    for (uint32_t i = 0; i < 100000u; i++) {
        if (SYST_CVR != first) {
            virtual_clock = 0;
            break;
        }
    }
    last = SYST_CVR;
    rem = 0;
    us = 0;
    return virtual_clock;
}

uint32_t clock_now_us(void)
{
    if (virtual_clock) {
        us += CLOCK_VIRTUAL_STEP_US;
        return us;
    }
    uint32_t cur = SYST_CVR;
    /* SysTick counts down. */
    uint32_t elapsed = (last - cur) & RELOAD;
    last = cur;
    rem += elapsed;
    us += rem / TICKS_PER_US;
    rem %= TICKS_PER_US;
    return us;
}
