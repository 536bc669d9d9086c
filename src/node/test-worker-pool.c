#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <errno.h>
#include <event2/thread.h>
#include <pthread.h>
#include <semaphore.h>
#include <unistd.h>

#include "node/worker-pool.h"

static sem_t gate;
static unsigned done_count;
static struct event_base *base;
static pthread_t loop_thread;

static void blocking_work(void *job)
{
    sem_wait(&gate);
    *(int *)job = 1;
}

static void done(void *job)
{
    assert_int_equal(*(int *)job, 1);
    assert_true(pthread_equal(pthread_self(), loop_thread));
    if (++done_count == 3) {
        event_base_loopbreak(base);
    }
}

static void test_capped_and_bounded(void **state)
{
    struct worker_pool *p = NULL;
    int jobs[4] = { 0 };

    evthread_use_pthreads();
    base = event_base_new();
    loop_thread = pthread_self();
    sem_init(&gate, 0, 0);
    assert_int_equal(worker_pool_new(base, 2, 1, &p), 0);
    /* Two run, one waits, the fourth is refused: the pool never grows past its caps. */
    assert_int_equal(worker_pool_submit(p, blocking_work, done, &jobs[0]), 0);
    assert_int_equal(worker_pool_submit(p, blocking_work, done, &jobs[1]), 0);
    assert_int_equal(worker_pool_submit(p, blocking_work, done, &jobs[2]), 0);
    assert_int_equal(worker_pool_submit(p, blocking_work, done, &jobs[3]), -EAGAIN);
    assert_int_equal(worker_pool_pending(p), 3);
    for (int i = 0; i < 3; i++) {
        sem_post(&gate);
    }
    struct timeval limit = { 30, 0 };
    event_base_loopexit(base, &limit);
    event_base_dispatch(base);
    assert_int_equal(done_count, 3);
    assert_int_equal(worker_pool_pending(p), 0);
    worker_pool_stop(p); /* the last idle thread to leave frees the pool */
    usleep(200 * 1000);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capped_and_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
