/*
 * The node clock of the firmware build: microseconds from SysTick.
 *
 * The self-test does not use it for the node: a conformance vector fixes the time of
 * every frame to the microsecond, so the self-test drives the node with the vector's own
 * clock (0, tick_us, 2 tick_us, ...), as tests/tests/conformance.rs does; it uses this
 * clock only to time the replay.
 */
#ifndef CLOCK_H
#define CLOCK_H

#include <stdint.h>

/* Core clock of the MPS2 AN385/AN386 images (QEMU models the same). */
#define CLOCK_SYSCLK_HZ 25000000u

/* Starts SysTick free-running from the core clock (no interrupt) and checks that it
 * moves; returns 1 when it does not (the clock then falls back to a counter that
 * advances CLOCK_VIRTUAL_STEP_US per call), 0 otherwise. */
int clock_init(void);

/* Microseconds since clock_init, wrapping. Must be called at least every 0.67 s (one
 * turn of SysTick's 24-bit counter at 25 MHz); the main loop calls it every pass. */
uint32_t clock_now_us(void);

#define CLOCK_VIRTUAL_STEP_US 50u

#endif /* CLOCK_H */
