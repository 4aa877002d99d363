/* A minimal test harness for the glue's host tests: CHECK / CHECK_EQ count failures and
 * print where; run_test names the test in the messages. */
#ifndef FCAN_GLUE_CHECK_H
#define FCAN_GLUE_CHECK_H

#include <stdio.h>

static int check_failures;
static int check_tests;
static const char *check_current = "";

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "FAIL %s (%s:%d): %s\n", check_current, __FILE__, __LINE__,    \
                    #cond);                                                                \
            check_failures++;                                                              \
        }                                                                                  \
    } while (0)

#define CHECK_EQ(a, b)                                                                     \
    do {                                                                                   \
        unsigned long check_a_ = (unsigned long)(a);                                       \
        unsigned long check_b_ = (unsigned long)(b);                                       \
        if (check_a_ != check_b_) {                                                        \
            fprintf(stderr, "FAIL %s (%s:%d): %s == %s: 0x%lX != 0x%lX\n", check_current,  \
                    __FILE__, __LINE__, #a, #b, check_a_, check_b_);                       \
            check_failures++;                                                              \
        }                                                                                  \
    } while (0)

static void run_test(const char *name, void (*fn)(void))
{
    int before = check_failures;
    check_current = name;
    check_tests++;
    fn();
    printf("%s %s\n", check_failures == before ? "ok  " : "FAIL", name);
}

#endif /* FCAN_GLUE_CHECK_H */
