// The real `e2b` SDK and auto-resume (issue 12): a sandbox created with
// lifecycle { onTimeout: 'pause', autoResume: true } says so in getInfo; after sbx.pause()
// (space's suspend) the SDK's next envd call through the ingress restores it and is served,
// with a process counting in memory and an unsynced file still there; a sandbox without
// autoResume is not woken by traffic (the call fails, the sandbox stays paused).
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const COUNTER = 'i=0; while :; do i=$((i+1)); echo $i > /dev/shm/count.tmp; ' +
  'mv /dev/shm/count.tmp /dev/shm/count; sleep 0.1; done'

const sbx = await Sandbox.create('base', {
  timeoutMs: 600_000, lifecycle: { onTimeout: 'pause', autoResume: true },
})
const plain = await Sandbox.create('base', { timeoutMs: 600_000 })
try {
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.deepEqual(info.lifecycle, { onTimeout: 'pause', autoResume: true })
  ok('getInfo echoes autoResume')
  await sbx.commands.run(`nohup sh -c '${COUNTER}' >/dev/null 2>&1 &`)
  await sleep(1000)
  await sbx.files.write('/home/user/unsynced.txt', 'before the pause')
  const before = parseInt((await sbx.files.read('/dev/shm/count')).trim(), 10)
  assert.equal(await sbx.pause(), true)
  assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
  // No connect: the read goes through the ingress, which restores the sandbox first.
  const after = parseInt((await sbx.files.read('/dev/shm/count')).trim(), 10)
  assert.ok(after >= before, `${after} < ${before}`)
  assert.equal(await sbx.files.read('/home/user/unsynced.txt'), 'before the pause')
  assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'running')
  ok('traffic restored the paused sandbox; memory and files survived')

  assert.equal(await plain.pause(), true)
  await assert.rejects(plain.files.read('/etc/hostname'))
  assert.equal((await Sandbox.getInfo(plain.sandboxId)).state, 'paused')
  ok('without autoResume traffic does not wake it')
} finally {
  await sbx.kill()
  await plain.kill()
}
console.log('ok all')
