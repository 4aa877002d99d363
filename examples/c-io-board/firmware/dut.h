/*
 * The node under test, as the self-test's player (selftest.c) drives it: the C
 * application of examples/c-io-board/app, adapted by dut_app.c. One board, booted again
 * for each vector.
 */
#ifndef DUT_H
#define DUT_H

#include <stdint.h>

#include "fcan.h"
#include "vectors.h"

/* Boots the board with the vector's configuration (node id, boot id, controller, wired
 * counts). Returns FCAN_OK or an FCAN_ERR_*. */
int32_t dut_boot(const vec_vector_t *v);

/* A frame the node hears at `now_us`. */
void dut_receive(const fcan_frame_t *frame, uint32_t now_us);

/* Runs the board and its node at `now_us`; every frame the node sends goes to
 * selftest_transmit. */
void dut_poll(uint32_t now_us);

/* Copies the node's current value of a topic (fcan_node_topic). */
int32_t dut_topic(uint8_t block, uint8_t topic, uint8_t *out, uint32_t cap);

/* The player's transmit callback: collects the frames of one poll. */
int32_t selftest_transmit(void *user, const fcan_frame_t *frame);

/* Printed once before the vectors (RAM the node needs and has, ...). */
void dut_describe(void);

#endif /* DUT_H */
