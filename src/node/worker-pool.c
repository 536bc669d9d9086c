/* The node's worker pool; see worker-pool.h. */
#include "node/worker-pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "basic/log.h"

struct pool_job {
    struct worker_pool *pool;
    worker_fn work, done;
    void *job;
    struct pool_job *next;
};

struct worker_pool {
    struct event_base *base;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct pool_job *head, *tail; /* queued, not yet taken */
    unsigned queued, queue_max;
    unsigned threads, idle; /* started threads, those waiting for a job */
    unsigned busy;          /* threads running a job */
    unsigned threads_max;
    unsigned pending; /* loop thread: submitted, done not yet run */
    unsigned alive;   /* threads not yet exited (under lock) */
    bool stopping;
};

static void pool_unref_locked(struct worker_pool *p, bool *ret_free)
{
    *ret_free = p->stopping && p->alive == 0;
}

static void job_done_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct pool_job *pj = userdata;
    pj->pool->pending--;
    pj->done(pj->job);
    free(pj);
}

static void *worker_main(void *userdata)
{
    struct worker_pool *p = userdata;
    struct timeval now = { 0, 0 };
    bool free_pool = false;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stopping) {
            p->idle++;
            pthread_cond_wait(&p->cond, &p->lock);
            p->idle--;
        }
        if (p->stopping) {
            break;
        }
        struct pool_job *pj = p->head;
        p->head = pj->next;
        if (!p->head) {
            p->tail = NULL;
        }
        p->queued--;
        p->busy++;
        pthread_mutex_unlock(&p->lock);

        pj->work(pj->job);

        pthread_mutex_lock(&p->lock);
        p->busy--;
        if (p->stopping) {
            /* The loop is going away: nobody would run done. The process is exiting. */
            free(pj);
            break;
        }
        if (event_base_once(p->base, -1, EV_TIMEOUT, job_done_cb, pj, &now) < 0) {
            /* Only on OOM inside libevent; losing the completion would wedge a request. */
            abort();
        }
    }
    p->alive--;
    pool_unref_locked(p, &free_pool);
    pthread_mutex_unlock(&p->lock);
    if (free_pool) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        free(p);
    }
    return NULL;
}

int worker_pool_new(struct event_base *base, unsigned threads, unsigned queue_max,
                    struct worker_pool **ret)
{
    struct worker_pool *p = calloc(1, sizeof(*p));
    if (!p) {
        return -ENOMEM;
    }
    p->base = base;
    p->threads_max = threads ? threads : 1;
    p->queue_max = queue_max;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    *ret = p;
    return 0;
}

/* Jobs that would wait for a thread if one more were queued (under lock). */
static unsigned would_wait_locked(const struct worker_pool *p)
{
    unsigned free_threads = p->threads - p->busy; /* idle or still starting */
    return p->queued + 1 > free_threads ? p->queued + 1 - free_threads : 0;
}

int worker_pool_submit(struct worker_pool *p, worker_fn work, worker_fn done, void *job)
{
    struct pool_job *pj;
    int r = 0;

    pj = malloc(sizeof(*pj));
    if (!pj) {
        return -ENOMEM;
    }
    *pj = (struct pool_job){ .pool = p, .work = work, .done = done, .job = job };
    pthread_mutex_lock(&p->lock);
    if (p->stopping) {
        r = -ESHUTDOWN;
    } else if (would_wait_locked(p) > 0 && p->threads < p->threads_max) {
        /* Threads start on demand, up to the cap: an idle node holds none it never used. */
        pthread_attr_t attr;
        pthread_t t;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, worker_main, p) == 0) {
            p->threads++;
            p->alive++;
        } else if (p->threads == 0) {
            r = -EAGAIN;
        }
        pthread_attr_destroy(&attr);
    }
    if (r == 0 && would_wait_locked(p) > p->queue_max) {
        r = -EAGAIN;
    }
    if (r == 0) {
        if (p->tail) {
            p->tail->next = pj;
        } else {
            p->head = pj;
        }
        p->tail = pj;
        p->queued++;
        p->pending++;
        pthread_cond_signal(&p->cond);
    }
    pthread_mutex_unlock(&p->lock);
    if (r < 0) {
        free(pj);
    }
    return r;
}

unsigned worker_pool_pending(const struct worker_pool *p)
{
    return p ? p->pending : 0;
}

void worker_pool_stop(struct worker_pool *p)
{
    bool free_pool = false;

    if (!p) {
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    /* Queued jobs never start; their owners are torn down with the process. */
    while (p->head) {
        struct pool_job *pj = p->head;
        p->head = pj->next;
        free(pj);
    }
    p->tail = NULL;
    p->queued = 0;
    pthread_cond_broadcast(&p->cond);
    pool_unref_locked(p, &free_pool);
    pthread_mutex_unlock(&p->lock);
    if (free_pool) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        free(p);
    }
}
