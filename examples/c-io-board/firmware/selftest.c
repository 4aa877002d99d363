/*
 * The firmware's self-test: the project's I/O-board conformance vectors
 * (conformance/boot-io-board-*.txt and node-*.txt, converted to C tables by vectors2c.py)
 * replayed through the C application on the target, as tests/tests/conformance.rs
 * replays them through the Rust I/O board (examples/io-board):
 *
 *   boot the board with the vector's header (node id, boot id, controller, wired counts);
 *   for now = 0, tick_us, 2 tick_us, ... up to end_us:
 *     poll the board at `now`; the frames it sends must be exactly the vector's `N`
 *       lines at `now`, in order (identifier, standard/extended, Classical/FD, BRS,
 *       length, payload: the Rust test compares the candump texts, which hold the same);
 *     feed it the `M` frames at `now`, in order, stamped `now`;
 *     check every `topic` line at `now` against the node's copy of the topic.
 *
 * The node's clock is the vector's: the vectors fix every frame to the tick, so a
 * wall clock cannot be used (under QEMU it would be the host's time). A vector stops at
 * its first difference; the line printed names the time, the vector's line, and what
 * was wanted and sent. Output and exit code through semihosting: a PASS/FAIL line per
 * vector, then `fcan C firmware self-test: PASS` and exit status 0 only if all pass.
 */
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "dut.h"
#include "semihosting.h"
#include "vectors.h"

/* More than any vector has in one tick (17: a 16-frame SCHEMA_DATA and a HEARTBEAT). */
#define SENT_MAX 64u

static fcan_frame_t sent[SENT_MAX];
static uint32_t n_sent;
static uint32_t sent_overflow;

int32_t selftest_transmit(void *user, const fcan_frame_t *frame)
{
    (void)user;
    if (n_sent < SENT_MAX) {
        sent[n_sent++] = *frame;
    } else {
        sent_overflow++;
    }
    return 0;
}

#define FRAME_FLAGS (FCAN_FRAME_EXTENDED | FCAN_FRAME_FD | FCAN_FRAME_BRS)

static int same_frame(const fcan_frame_t *got, const vec_event_t *want)
{
    return got->id == want->id && (got->flags & FRAME_FLAGS) == want->flags &&
           got->len == want->len && memcmp(got->data, &vec_bytes[want->data], want->len) == 0;
}

/* candump -L notation, as the vectors write frames. */
static void out_frame(uint32_t id, uint8_t flags, const uint8_t *data, uint8_t len)
{
    out_hex(id, (flags & FCAN_FRAME_EXTENDED) ? 8u : 3u);
    if (flags & FCAN_FRAME_FD) {
        out_str("##");
        out_char((flags & FCAN_FRAME_BRS) ? '1' : '0');
    } else {
        out_char('#');
    }
    out_bytes(data, len);
}

static void out_want(const vec_event_t *e)
{
    out_frame(e->id, e->flags, &vec_bytes[e->data], e->len);
}

static void out_got(const fcan_frame_t *f)
{
    out_frame(f->id, f->flags, f->data, f->len);
}

typedef struct {
    uint32_t ticks;
    uint32_t node_frames;
    uint32_t master_frames;
    uint32_t topics;
} replay_stats_t;

static void fail_head(const vec_vector_t *v, uint32_t now)
{
    out_str("FAIL ");
    out_str(v->name);
    out_str(" at ");
    out_u32(now);
    out_str(" us: ");
}

/* Prints the frames wanted and sent at one tick, marking the first difference. */
static void fail_frames(const vec_vector_t *v, uint32_t now, const vec_event_t *from,
                        const vec_event_t *to)
{
    uint32_t k = 0;
    uint32_t first_diff = 0xFFFFFFFFu;
    const vec_event_t *e;
    fail_head(v, now);
    out_str("the node's frames differ");
    if (sent_overflow) {
        out_str(" (and it sent more than ");
        out_u32(SENT_MAX);
        out_str(" frames in one poll)");
    }
    out_char('\n');
    for (e = from; e < to; e++) {
        if (e->kind != VEC_NODE) {
            continue;
        }
        if (first_diff == 0xFFFFFFFFu && (k >= n_sent || !same_frame(&sent[k], e))) {
            first_diff = k;
        }
        out_str(k == first_diff ? "  * want " : "    want ");
        out_want(e);
        out_str("   (line ");
        out_u32(e->line);
        out_str(")\n");
        k++;
    }
    if (k == 0) {
        out_str("    want nothing\n");
    }
    for (uint32_t i = 0; i < n_sent; i++) {
        out_str(i == first_diff || (first_diff == 0xFFFFFFFFu && i == k) ? "  * sent "
                                                                          : "    sent ");
        out_got(&sent[i]);
        out_char('\n');
    }
    if (n_sent == 0) {
        out_str("    sent nothing\n");
    }
}

static int replay(const vec_vector_t *v, replay_stats_t *st)
{
    const vec_event_t *ev = &vec_events[v->first_event];
    const vec_event_t *const end = ev + v->n_events;
    static fcan_frame_t in;
    static uint8_t topic[64];

    memset(st, 0, sizeof *st);
    int32_t rc = dut_boot(v);
    if (rc != FCAN_OK) {
        fail_head(v, 0);
        out_str("the board did not boot: ");
        out_str(fcan_strerror(rc));
        out_char('\n');
        return 0;
    }
    for (uint32_t now = 0;; now += v->tick_us) {
        const vec_event_t *next = ev;
        while (next < end && next->t_us == now) {
            next++;
        }
        /* The node runs first; what it sends is the `N` lines of this tick. */
        n_sent = 0;
        sent_overflow = 0;
        dut_poll(now);
        uint32_t k = 0;
        int ok = sent_overflow == 0;
        for (const vec_event_t *e = ev; e < next && ok; e++) {
            if (e->kind == VEC_NODE) {
                ok = k < n_sent && same_frame(&sent[k], e);
                k++;
            }
        }
        if (!ok || k != n_sent) {
            fail_frames(v, now, ev, next);
            return 0;
        }
        st->node_frames += n_sent;
        /* Then the master's frames reach it, stamped with the same time. */
        for (const vec_event_t *e = ev; e < next; e++) {
            if (e->kind == VEC_MASTER) {
                memset(&in, 0, sizeof in);
                in.id = e->id;
                in.flags = e->flags;
                in.len = e->len;
                memcpy(in.data, &vec_bytes[e->data], e->len);
                dut_receive(&in, now);
                st->master_frames++;
            }
        }
        /* And the topics must hold what the vector says. */
        for (const vec_event_t *e = ev; e < next; e++) {
            if (e->kind != VEC_TOPIC) {
                continue;
            }
            uint8_t block = (uint8_t)(e->id >> 8);
            uint8_t t = (uint8_t)e->id;
            int32_t n = dut_topic(block, t, topic, sizeof topic);
            if (n != (int32_t)e->len || memcmp(topic, &vec_bytes[e->data], e->len) != 0) {
                fail_head(v, now);
                out_str("topic ");
                out_u32(block);
                out_char('.');
                out_u32(t);
                out_str(" (line ");
                out_u32(e->line);
                out_str(")\n    want ");
                out_bytes(&vec_bytes[e->data], e->len);
                out_str("\n    has  ");
                if (n >= 0) {
                    out_bytes(topic, (uint32_t)n);
                } else {
                    out_str(fcan_strerror(n));
                }
                out_char('\n');
                return 0;
            }
            st->topics++;
        }
        ev = next;
        st->ticks++;
        if (v->end_us - now < v->tick_us) {
            break;
        }
    }
    return 1;
}

/* Stack use: the stack region is painted at boot and the deepest overwritten word found
 * at the end. */
extern uint32_t __stack_limit;
#define PAINT 0xC0DEC0DEu

static void paint_stack(void)
{
    uint32_t *sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (uint32_t *p = &__stack_limit; p < sp - 16; p++) {
        *p = PAINT;
    }
}

static uint32_t stack_used(void)
{
    extern uint32_t __stack_top;
    const uint32_t *p = &__stack_limit;
    while (p < &__stack_top && *p == PAINT) {
        p++;
    }
    return (uint32_t)((uintptr_t)&__stack_top - (uintptr_t)p);
}

/* A fault ends the run with its own status instead of hanging until the timeout. */
void HardFault_Handler(void) __attribute__((naked));
void hardfault_report(const uint32_t *frame) __attribute__((used, noreturn));

void HardFault_Handler(void)
{
    __asm__ volatile("tst lr, #4\n\t"
                     "ite eq\n\t"
                     "mrseq r0, msp\n\t"
                     "mrsne r0, psp\n\t"
                     "b hardfault_report\n\t");
}

void hardfault_report(const uint32_t *frame)
{
    out_flush();
    out_str("FAIL: HardFault at pc 0x");
    out_hex(frame[6], 8);
    out_str(", lr 0x");
    out_hex(frame[5], 8);
    out_str(", HFSR 0x");
    out_hex(*(volatile uint32_t *)0xE000ED2Cu, 8);
    out_str(", CFSR 0x");
    out_hex(*(volatile uint32_t *)0xE000ED28u, 8);
    out_char('\n');
    sh_exit(3);
}

int main(void)
{
    paint_stack();
    int virtual_clock = clock_init();
    out_str("fcan C firmware self-test: the I/O-board conformance vectors replayed through "
            "the C application (");
    out_u32(vec_count);
    out_str(" vectors)\n");
    dut_describe();
    uint32_t failed = 0;
    uint32_t t0 = clock_now_us();
    for (uint32_t i = 0; i < vec_count; i++) {
        const vec_vector_t *v = &vec_vectors[i];
        replay_stats_t st;
        if (replay(v, &st)) {
            out_str("PASS ");
            out_str(v->name);
            out_str(": ");
            out_u32(st.ticks);
            out_str(" ticks, ");
            out_u32(st.node_frames);
            out_str(" node frames matched, ");
            out_u32(st.master_frames);
            out_str(" frames fed, ");
            out_u32(st.topics);
            out_str(" topic checks\n");
        } else {
            failed++;
        }
    }
    uint32_t t1 = clock_now_us();
    out_str("  stack used: ");
    out_u32(stack_used());
    out_str(" B; replay took ");
    out_u32((t1 - t0) / 1000u);
    out_str(virtual_clock ? " ms (virtual clock: SysTick does not move)\n"
                          : " ms of SysTick time (QEMU: host time, not the target's speed)\n");
    if (failed == 0) {
        out_str("fcan C firmware self-test: PASS\n");
        sh_exit(0);
    }
    out_str("fcan C firmware self-test: FAIL (");
    out_u32(failed);
    out_str(" of ");
    out_u32(vec_count);
    out_str(" vectors)\n");
    sh_exit(1);
}
