// The real `e2b` SDK creating from the warm pool (issue 11): two sandboxes made while the
// node's pool is full come from it (test_pool_compat.py checks the node's counters), each
// with its own envs, hostname and entropy, each running commands.
// Configuration as in compat.mjs (E2B_* from the environment).
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)

const a = await Sandbox.create('base', { timeoutMs: 120_000, envs: { WHO: 'a' } })
const b = await Sandbox.create('base', { timeoutMs: 120_000, envs: { WHO: 'b' } })
try {
  ok('create')
  const seen = []
  for (const [sbx, who] of [[a, 'a'], [b, 'b']]) {
    const r = await sbx.commands.run('echo $WHO; hostname; head -c 16 /dev/urandom | od -An -tx1')
    const [w, host, rnd] = r.stdout.split('\n')
    assert.equal(w, who)
    assert.ok(sbx.sandboxId.startsWith(host), `${host} vs ${sbx.sandboxId}`)
    seen.push(rnd)
  }
  assert.notEqual(seen[0], seen[1])
  ok('distinct')
} finally {
  await a.kill()
  await b.kill()
}
ok('all')
