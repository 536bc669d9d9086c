/* capacity_room(): how many more instances of one size the budgets take (the warm pool's room
 * to grow, pool-target.h), on a manager with a hand-made table and no loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "basic/macro.h"
#include "node/capacity.h"
#include "node/manager.h"

static struct vm vms[8];
static struct vm *table[8];

/* A manager of n instances of 512 MiB and one vCPU each, the first `bound` of them sandboxes. */
static void setup_manager(struct manager *m, size_t n, size_t bound)
{
    *m =
        (struct manager){ .vms = table, .n_vms = n, .max_sandboxes = 100, .vmm_overhead_mib = 256 };
    for (size_t i = 0; i < n; i++) {
        vms[i] = (struct vm){ .rec = { .vcpus = 1, .memory_mib = 512 } };
        if (i < bound) {
            snprintf(vms[i].rec.sandbox_id, sizeof(vms[i].rec.sandbox_id), "sb%zu", i);
        }
        table[i] = &vms[i];
    }
}

static void test_room_is_the_tightest_budget(void **state)
{
    struct manager m;

    setup_manager(&m, 0, 0);
    m.memory_budget_mib = 2 * 768 + 384; /* two instances of 512 + 256, not three */
    assert_int_equal(capacity_room(&m, 1, 512), 2);
    m.vcpu_budget = 2;
    assert_int_equal(capacity_room(&m, 2, 512), 1); /* two vCPUs each: one */
    m.max_sandboxes = 1;
    assert_int_equal(capacity_room(&m, 1, 512), 1);
    m.max_sandboxes = 0;
    assert_int_equal(capacity_room(&m, 1, 512), 0);
}

static void test_room_counts_sandboxes_and_members(void **state)
{
    struct manager m;

    setup_manager(&m, 2, 1); /* a sandbox and a pool member */
    m.memory_budget_mib = 4 * 768;
    assert_int_equal(capacity_room(&m, 1, 512), 2);
    m.memory_budget_mib = 2 * 768;
    assert_int_equal(capacity_room(&m, 1, 512), 0);
    m.memory_budget_mib = 768; /* over the budget already (it shrank): none, no wrap */
    assert_int_equal(capacity_room(&m, 1, 512), 0);
    m.memory_budget_mib = 0; /* no memory budget: the instance count decides */
    m.max_sandboxes = 5;
    assert_int_equal(capacity_room(&m, 1, 512), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_room_is_the_tightest_budget),
        cmocka_unit_test(test_room_counts_sandboxes_and_members),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
