// The real `e2b` SDK (pinned in package.json) and fork (issue 12): sbx.fork({count, timeoutMs})
// (POST /sandboxes/{id}/fork, 201 [{sandbox} | {error}]) gives running Sandbox objects that see
// the parent's files (one never synced) and its running process, each under its own id,
// hostname and token, diverging from each other while the parent runs on; Sandbox.fork(id)
// defaults to one; a fork refused for capacity is a RateLimitError entry, not a throw; an
// unknown sandbox throws SandboxNotFoundError; no snapshot is left behind.
// The platform runs with --max-sandboxes 3 (test_fork_compat.py).
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import { RateLimitError, Sandbox, SandboxNotFoundError } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)
const COUNTER = 'i=0; while :; do i=$((i+1)); echo $i > /dev/shm/count.tmp; ' +
  'mv /dev/shm/count.tmp /dev/shm/count; sleep 0.2; done'
const count = async (s) => Number((await s.commands.run('cat /dev/shm/count')).stdout)

const src = await Sandbox.create('base', { timeoutMs: 600_000 })
const made = [src]
try {
  await src.files.write('/home/user/fork.txt', 'from the parent')
  await src.commands.run(`nohup sh -c '${COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/pid; ` +
    'echo cached > /home/user/cached.txt')
  while (!(await src.commands.run('cat /dev/shm/count 2>/dev/null || echo 0')).stdout.trim()
    .match(/^[1-9]/)) {
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  const before = await count(src)

  const forks = await src.fork({ count: 2, timeoutMs: 300_000 })
  assert.equal(forks.length, 2)
  for (const f of forks) {
    assert.ok(f instanceof Sandbox, String(f))
    made.push(f)
  }
  assert.equal(new Set([src.sandboxId, ...forks.map((f) => f.sandboxId)]).size, 3)
  for (const f of forks) {
    const seen = await f.commands.run('cat /home/user/fork.txt; echo; cat /home/user/cached.txt; ' +
      'hostname; echo "$E2B_SANDBOX_ID"; kill -0 "$(cat /dev/shm/pid)" && echo counter-alive')
    assert.equal(seen.stdout,
      `from the parent\ncached\n${f.sandboxId}\n${f.sandboxId}\ncounter-alive\n`)
    assert.ok(await count(f) >= before)
    const info = await Sandbox.getInfo(f.sandboxId)
    assert.equal(info.state, 'running')
    assert.equal(info.templateId, 'base')
  }
  await forks[0].files.write('/home/user/fork.txt', 'changed in fork 0')
  assert.equal(await forks[1].files.read('/home/user/fork.txt'), 'from the parent')
  assert.equal(await src.files.read('/home/user/fork.txt'), 'from the parent')
  assert.ok(await count(src) > before)
  ok('sbx.fork({count: 2})')

  // Three live (the cap): the fork is attempted and refused per entry, not thrown.
  const full = await Sandbox.fork(src.sandboxId, { count: 1 })
  assert.equal(full.length, 1)
  assert.ok(full[0] instanceof RateLimitError, String(full[0]))
  ok('capacity refusal is a RateLimitError entry')

  await forks[1].kill()
  const one = await Sandbox.fork(src.sandboxId)
  assert.equal(one.length, 1)
  assert.ok(one[0] instanceof Sandbox, String(one[0]))
  made.push(one[0])
  assert.equal((await one[0].commands.run('hostname')).stdout, `${one[0].sandboxId}\n`)
  ok('Sandbox.fork(id) defaults to one')

  await assert.rejects(Sandbox.fork('aaaaaaaaaaaaaaaaaaaa'), SandboxNotFoundError)
  await assert.rejects(src.fork({ count: 17 }))
  ok('unknown sandbox and a bad count')

  assert.deepEqual(await Sandbox.listSnapshots().nextItems(), [])
  ok('no snapshot left')
} finally {
  for (const s of made) await s.kill().catch(() => {})
}
ok('all')
