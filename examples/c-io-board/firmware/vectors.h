/*
 * The I/O-board conformance vectors as C tables (vectors2c.py writes the definitions
 * from the conformance .txt files at build time; selftest.c replays them).
 */
#ifndef VECTORS_H
#define VECTORS_H

#include <stdint.h>

#include "fcan.h"

/* What a timed line of a transcript is. */
enum {
    VEC_MASTER = 0, /* `M`: a frame the node hears at this time */
    VEC_NODE = 1,   /* `N`: a frame the node sends at this time */
    VEC_TOPIC = 2,  /* `topic`: after this time's frames, the node's copy of a topic */
};

/* One timed line. */
typedef struct {
    uint32_t t_us;
    /* VEC_MASTER / VEC_NODE: the CAN identifier; VEC_TOPIC: block << 8 | topic. */
    uint32_t id;
    /* Offset of the payload (or the topic's bytes) in vec_bytes. */
    uint32_t data;
    /* Line in the .txt file, for messages. */
    uint16_t line;
    /* Payload bytes. */
    uint8_t len;
    /* FCAN_FRAME_EXTENDED | FCAN_FRAME_FD | FCAN_FRAME_BRS. */
    uint8_t flags;
    uint8_t kind;
} vec_event_t;

/* One transcript: its header and its events (time order, file order within a time). */
typedef struct {
    const char *name;
    uint32_t first_event;
    uint32_t n_events;
    uint32_t boot_id;
    uint32_t tick_us;
    uint32_t end_us;
    uint8_t node_id;
    uint8_t controller; /* FCAN_CONTROLLER_FD when fd_capable */
    uint8_t wired[3];   /* outputs, inputs, analog sensors */
} vec_vector_t;

extern const uint32_t vec_count;
extern const vec_vector_t vec_vectors[];
extern const vec_event_t vec_events[];
extern const uint8_t vec_bytes[];

#endif /* VECTORS_H */
