/*
 * The C I/O board on a PC: the application of app/io_board_app.c on a SocketCAN
 * interface, as examples/host's `io-node` runs the Rust one.
 *
 *   io-board-c --bus socketcan:vcan0 --node-id 2 [--classic] [--boot-id X]
 *
 * One thread, one loop: poll(2) on the CAN socket with the timeout the application asks
 * for (io_board_app_poll_at), each received frame handed to the node and followed by a
 * poll, the clock CLOCK_MONOTONIC in µs since start (wrapping, as a board's timer since
 * boot). SIGINT / SIGTERM end it cleanly.
 */
#define _DEFAULT_SOURCE /* struct ifreq, CLOCK_MONOTONIC, sigaction with -std=c99 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/can.h>
#include <linux/can/raw.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "io_board_app.h"

static const char *prog = "io-board-c";

static void usage(FILE *to)
{
    fprintf(to,
            "Runs the C I/O board example node on a SocketCAN bus.\n"
            "\n"
            "Usage: %s --bus socketcan:IFACE --node-id N [--classic] [--boot-id X]\n"
            "\n"
            "  --bus socketcan:IFACE  the CAN interface (e.g. socketcan:vcan0)\n"
            "  --node-id N            this node's id, 0..126\n"
            "  --classic              Classical CAN only (default: CAN FD with BRS; the\n"
            "                         interface must then have MTU 72)\n"
            "  --boot-id X            the boot id (decimal or 0x hex; default: random from\n"
            "                         /dev/urandom, as a board draws one at every boot)\n"
            "  -h, --help             this text\n"
            "\n"
            "Example: %s --bus socketcan:vcan0 --node-id 2\n"
            "  beside: fcan serve --bus socketcan:vcan0\n",
            prog, prog);
}

static void bad_usage(const char *what, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s\n\n", prog, what, arg ? ": " : "", arg ? arg : "");
    usage(stderr);
    exit(2);
}

/* Parses an unsigned number no greater than `max`: decimal (`base` 10), or decimal or
 * hex with 0x (`base` 0; a leading 0 means octal, as strtoul has it). */
static int parse_u32(const char *s, int base, unsigned long max, uint32_t *out)
{
    char *end = NULL;
    unsigned long v;
    if (s == NULL || *s == '\0' || *s == '-' || *s == '+') {
        return -1;
    }
    errno = 0;
    v = strtoul(s, &end, base);
    if (errno != 0 || end == s || *end != '\0' || v > max) {
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* ---- signals: a flag and a self-pipe, so poll(2) wakes at once ---------------------- */

static volatile sig_atomic_t stop_signal = 0;
static int wake_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    char b = 1;
    stop_signal = sig;
    if (write(wake_pipe[1], &b, 1) < 0) {
        /* the pipe is full: a wake-up is pending anyway */
    }
    errno = saved;
}

/* ---- the clock ------------------------------------------------------------------- */

static struct timespec start;

/* µs since start, wrapping at 2^32 (about 71.6 minutes), as the node expects. */
static uint32_t now_us(void)
{
    struct timespec t;
    int64_t us;
    clock_gettime(CLOCK_MONOTONIC, &t);
    us = (int64_t)(t.tv_sec - start.tv_sec) * 1000000 + (t.tv_nsec - start.tv_nsec) / 1000;
    return (uint32_t)(uint64_t)us;
}

/* ---- the bus --------------------------------------------------------------------- */

typedef struct {
    int fd;
    /* A transmit was refused during the last poll: poll again soon (the node keeps the
     * frame and offers it again at its next poll). */
    int refused;
    int last_errno;
} bus_t;

static int32_t transmit(void *user, const fcan_frame_t *f)
{
    bus_t *bus = (bus_t *)user;
    canid_t id = f->id;
    ssize_t n;
    size_t want;

    if (f->flags & FCAN_FRAME_EXTENDED) {
        id = (id & CAN_EFF_MASK) | CAN_EFF_FLAG;
    } else {
        id &= CAN_SFF_MASK;
    }
    if (f->flags & FCAN_FRAME_FD) {
        struct canfd_frame cf;
        memset(&cf, 0, sizeof cf);
        cf.can_id = id;
        cf.len = f->len;
        cf.flags = (f->flags & FCAN_FRAME_BRS) ? CANFD_BRS : 0;
        memcpy(cf.data, f->data, f->len <= CANFD_MAX_DLEN ? f->len : CANFD_MAX_DLEN);
        want = CANFD_MTU;
        n = write(bus->fd, &cf, want);
    } else {
        struct can_frame cf;
        memset(&cf, 0, sizeof cf);
        cf.can_id = id;
        cf.can_dlc = f->len;
        memcpy(cf.data, f->data, f->len <= CAN_MAX_DLEN ? f->len : CAN_MAX_DLEN);
        want = CAN_MTU;
        n = write(bus->fd, &cf, want);
    }
    if (n == (ssize_t)want) {
        bus->last_errno = 0;
        return 0;
    }
    /* Refused: the node keeps the frame and retries at a later poll. A full queue
     * (EAGAIN, ENOBUFS) is the normal case; anything else is said once. */
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS &&
        errno != bus->last_errno) {
        fprintf(stderr, "%s: send: %s\n", prog, strerror(errno));
        bus->last_errno = errno;
    }
    bus->refused = 1;
    return 1;
}

/* Opens a raw CAN socket on `iface`, non-blocking, FD frames unless `classic`. Returns
 * the socket or -1 (said why). */
static int open_bus(const char *iface, int classic)
{
    struct sockaddr_can addr;
    struct ifreq ifr;
    int fd, on = 1;

    if (strlen(iface) >= IFNAMSIZ) {
        fprintf(stderr, "%s: interface name too long: %s\n", prog, iface);
        return -1;
    }
    fd = socket(PF_CAN, SOCK_RAW, CAN_RAW);
    if (fd < 0) {
        fprintf(stderr, "%s: CAN socket: %s\n", prog, strerror(errno));
        return -1;
    }
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, iface, IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0) {
        fprintf(stderr, "%s: no CAN interface %s: %s\n", prog, iface, strerror(errno));
        close(fd);
        return -1;
    }
    memset(&addr, 0, sizeof addr);
    addr.can_family = AF_CAN;
    addr.can_ifindex = ifr.ifr_ifindex;
    if (!classic) {
        if (ioctl(fd, SIOCGIFMTU, &ifr) < 0) {
            fprintf(stderr, "%s: MTU of %s: %s\n", prog, iface, strerror(errno));
            close(fd);
            return -1;
        }
        if (ifr.ifr_mtu != CANFD_MTU) {
            fprintf(stderr,
                    "%s: %s is not a CAN FD interface (MTU %d, CAN FD needs %d): use "
                    "--classic, or `ip link set %s mtu 72`\n",
                    prog, iface, ifr.ifr_mtu, (int)CANFD_MTU, iface);
            close(fd);
            return -1;
        }
        if (setsockopt(fd, SOL_CAN_RAW, CAN_RAW_FD_FRAMES, &on, sizeof on) < 0) {
            fprintf(stderr, "%s: CAN_RAW_FD_FRAMES: %s\n", prog, strerror(errno));
            close(fd);
            return -1;
        }
    }
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        fprintf(stderr, "%s: bind %s: %s\n", prog, iface, strerror(errno));
        close(fd);
        return -1;
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        fprintf(stderr, "%s: non-blocking socket: %s\n", prog, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads one frame. 1: `out` holds it; 0: none waiting; -1: the socket failed. Error,
 * remote and (on a Classical node) FD frames are skipped. */
static int read_frame(bus_t *bus, fcan_frame_t *out)
{
    for (;;) {
        union {
            struct can_frame cc;
            struct canfd_frame fd;
        } buf;
        ssize_t n = read(bus->fd, &buf, sizeof buf);
        canid_t id;
        uint8_t len;
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return 0;
            }
            if (errno == EINTR) {
                continue;
            }
            fprintf(stderr, "%s: receive: %s\n", prog, strerror(errno));
            return -1;
        }
        memset(out, 0, sizeof *out);
        id = buf.cc.can_id;
        if (id & (CAN_ERR_FLAG | CAN_RTR_FLAG)) {
            continue;
        }
        if (n == (ssize_t)CANFD_MTU) {
            len = buf.fd.len <= CANFD_MAX_DLEN ? buf.fd.len : CANFD_MAX_DLEN;
            out->flags = FCAN_FRAME_FD;
            if (buf.fd.flags & CANFD_BRS) {
                out->flags |= FCAN_FRAME_BRS;
            }
        } else if (n == (ssize_t)CAN_MTU) {
            len = buf.cc.can_dlc <= CAN_MAX_DLEN ? buf.cc.can_dlc : CAN_MAX_DLEN;
        } else {
            continue;
        }
        if (id & CAN_EFF_FLAG) {
            out->id = id & CAN_EFF_MASK;
            out->flags |= FCAN_FRAME_EXTENDED;
        } else {
            out->id = id & CAN_SFF_MASK;
        }
        out->len = len;
        memcpy(out->data, buf.fd.data, len);
        return 1;
    }
}

/* ---- events ---------------------------------------------------------------------- */

static void on_event(void *user, fcan_node_t *node, uint32_t event)
{
    (void)user;
    (void)node;
    switch (event) {
    case FCAN_EVENT_ACKNOWLEDGED:
        printf("%s: acknowledged by a master\n", prog);
        break;
    case FCAN_EVENT_STARTED:
        printf("%s: started\n", prog);
        break;
    case FCAN_EVENT_MASTER_LOST:
        printf("%s: master lost: outputs off\n", prog);
        break;
    case FCAN_EVENT_ID_COLLISION:
        printf("%s: another node has this node id: silent until restarted\n", prog);
        break;
    case FCAN_EVENT_PLAN_RESET:
        printf("%s: plan reset by the master\n", prog);
        break;
    default:
        break;
    }
    fflush(stdout);
}

/* A non-zero boot id from /dev/urandom; -1 if it cannot be read. */
static int random_boot_id(uint32_t *out)
{
    FILE *f = fopen("/dev/urandom", "rb");
    uint32_t v = 0;
    if (f == NULL) {
        return -1;
    }
    while (v == 0) {
        if (fread(&v, sizeof v, 1, f) != 1) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static fcan_io_board_ram_t ram;
    static io_board_app_t app;
    const char *bus_arg = NULL;
    uint32_t node_id = 0, boot_id = 0;
    int have_node_id = 0, have_boot_id = 0, classic = 0;
    fcan_io_board_config_t config;
    struct sigaction sa;
    bus_t bus;
    int i, rc, status = 0;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--classic") == 0) {
            classic = 1;
        } else if (strcmp(a, "--bus") == 0 || strcmp(a, "--node-id") == 0 ||
                   strcmp(a, "--boot-id") == 0) {
            const char *v = i + 1 < argc ? argv[++i] : NULL;
            if (v == NULL) {
                bad_usage("missing value for", a);
            }
            if (strcmp(a, "--bus") == 0) {
                bus_arg = v;
            } else if (strcmp(a, "--node-id") == 0) {
                if (parse_u32(v, 10, 126, &node_id) != 0) {
                    bad_usage("--node-id must be 0..126, not", v);
                }
                have_node_id = 1;
            } else {
                if (parse_u32(v, 0, 0xFFFFFFFFul, &boot_id) != 0) {
                    bad_usage("--boot-id must be a 32-bit number, not", v);
                }
                have_boot_id = 1;
            }
        } else {
            bad_usage("unknown argument", a);
        }
    }
    if (bus_arg == NULL) {
        bad_usage("--bus is required", NULL);
    }
    if (!have_node_id) {
        bad_usage("--node-id is required", NULL);
    }
    if (strncmp(bus_arg, "socketcan:", 10) != 0 || bus_arg[10] == '\0') {
        bad_usage("--bus must be socketcan:IFACE, not", bus_arg);
    }
    if (!have_boot_id && random_boot_id(&boot_id) != 0) {
        fprintf(stderr, "%s: cannot read /dev/urandom for a boot id (give --boot-id)\n", prog);
        return 1;
    }

    memset(&bus, 0, sizeof bus);
    bus.fd = open_bus(bus_arg + 10, classic);
    if (bus.fd < 0) {
        return 1;
    }
    if (pipe(wake_pipe) != 0 || fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK) < 0 ||
        fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK) < 0) {
        fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
        return 1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    memset(&config, 0, sizeof config);
    config.node_id = (uint8_t)node_id;
    config.controller = classic ? FCAN_CONTROLLER_CLASSIC : FCAN_CONTROLLER_FD;
    config.boot_id = boot_id;
    config.counts[0] = FCAN_IO_BOARD_OUT_MAX_COUNT;
    config.counts[1] = FCAN_IO_BOARD_IN_MAX_COUNT;
    config.counts[2] = FCAN_IO_BOARD_ANALOG_MAX_COUNT;
    config.transmit = transmit;
    config.event = on_event;
    config.user = &bus;

    clock_gettime(CLOCK_MONOTONIC, &start);
    rc = io_board_app_init(&app, &ram, &config);
    if (rc != FCAN_OK) {
        fprintf(stderr, "%s: node init: %s\n", prog, fcan_strerror(rc));
        return 1;
    }
    printf("%s: node %u on %s (%s), boot id 0x%08lX\n", prog, (unsigned)node_id,
           bus_arg + 10, classic ? "Classical CAN" : "CAN FD", (unsigned long)boot_id);
    fflush(stdout);

    while (!stop_signal) {
        struct pollfd fds[2];
        uint32_t now, deadline;
        int timeout_ms = -1, frames, r;
        fcan_frame_t frame;

        bus.refused = 0;
        io_board_app_poll(&app, now_us());

        now = now_us();
        if (io_board_app_poll_at(&app, now, &deadline) == 1) {
            uint32_t wait_us = deadline - now;
            /* At or before now (within the wrapping clock's past half): at once. */
            if (wait_us >= 0x80000000u) {
                wait_us = 0;
            }
            /* poll(2) counts ms: round up, so the deadline has passed at wake-up. */
            timeout_ms = (int)((wait_us + 999u) / 1000u);
        }
        if (bus.refused && (timeout_ms < 0 || timeout_ms > 1)) {
            /* The controller's queue was full: offer the frame again soon. */
            timeout_ms = 1;
        }
        fds[0].fd = bus.fd;
        fds[0].events = POLLIN;
        fds[1].fd = wake_pipe[0];
        fds[1].events = POLLIN;
        r = poll(fds, 2, timeout_ms);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            fprintf(stderr, "%s: poll: %s\n", prog, strerror(errno));
            status = 1;
            break;
        }
        if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            /* The interface went down or away (ENETDOWN, ENODEV): the bus closed. */
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(bus.fd, SOL_SOCKET, SO_ERROR, &err, &len);
            fprintf(stderr, "%s: the CAN interface failed: %s\n", prog,
                    err != 0 ? strerror(err) : "hung up");
            status = 1;
            break;
        }
        /* Every frame waiting, each followed by a poll (as the Rust host loop does), so
         * the node's receive queue never overflows. */
        for (frames = 0; frames < 256 && !stop_signal; frames++) {
            int got = read_frame(&bus, &frame);
            if (got < 0) {
                status = 1;
                break;
            }
            if (got == 0) {
                break;
            }
            now = now_us();
            io_board_app_receive(&app, &frame, now);
            bus.refused = 0;
            io_board_app_poll(&app, now);
        }
        if (status != 0) {
            break;
        }
    }
    if (stop_signal) {
        printf("%s: stopped (%s)\n", prog, stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    }
    close(bus.fd);
    close(wake_pipe[0]);
    close(wake_pipe[1]);
    return status;
}
