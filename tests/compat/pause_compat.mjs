// The real `e2b` SDK (pinned in package.json) and pause (issue 12): sbx.pause() is space's
// suspend (memory, devices and disk to disk, the VM released), Sandbox.connect() restores it
// (a running one only gets its TTL extended), a second pause returns false (409), and
// lifecycle.onTimeout: "pause" suspends at the timeout instead of killing. A process
// counting in memory and files written just before each pause (never synced) survive,
// over several cycles in a row (E2B#884) and across an auto-pause (E2B#1104).
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const COUNTER = 'i=0; while :; do i=$((i+1)); echo $i > /dev/shm/count.tmp; ' +
  'mv /dev/shm/count.tmp /dev/shm/count; sleep 0.1; done'

async function count(sbx) {
  return parseInt((await sbx.files.read('/dev/shm/count')).trim(), 10)
}

async function waitState(id, want, ms) {
  const deadline = Date.now() + ms
  for (;;) {
    const info = await Sandbox.getInfo(id)
    if (info.state === want) return info
    if (Date.now() > deadline) throw new Error(`${id} never became ${want}: ${info.state}`)
    await sleep(500)
  }
}

let sbx = await Sandbox.create('base', { timeoutMs: 600_000 })
const id = sbx.sandboxId
try {
  await sbx.commands.run(`nohup sh -c '${COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/pid`)
  await sleep(1000)
  const pid = (await sbx.files.read('/dev/shm/pid')).trim()
  let last = await count(sbx)
  for (let cycle = 1; cycle <= 3; cycle++) {
    // Written just before the pause, never synced: only the guest's page cache has it.
    await sbx.files.write(`/home/user/unsynced-${cycle}.txt`, `cycle ${cycle}`)
    const t0 = Date.now()
    assert.equal(await sbx.pause(), true)
    const paused = Date.now() - t0
    assert.equal(await sbx.pause(), false, 'a second pause is 409, the SDK\'s false')
    assert.equal((await Sandbox.getInfo(id)).state, 'paused')
    const listed = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
    assert.ok(listed.some((s) => s.sandboxId === id && s.state === 'paused'), 'listed paused')
    const t1 = Date.now()
    sbx = await Sandbox.connect(id)
    console.log(`cycle ${cycle}: pause ${paused} ms, connect (restore) ${Date.now() - t1} ms`)
    assert.equal(sbx.sandboxId, id, 'the same sandbox comes back')
    assert.equal((await Sandbox.getInfo(id)).state, 'running')
    for (let k = 1; k <= cycle; k++) {
      assert.equal(await sbx.files.read(`/home/user/unsynced-${k}.txt`), `cycle ${k}`)
    }
    assert.equal((await sbx.files.read('/dev/shm/pid')).trim(), pid, 'the same process')
    const now = await count(sbx)
    assert.ok(now >= last, `the count went on from ${last}, not back (${now})`)
    last = now
  }
  await sleep(1000)
  assert.ok(await count(sbx) > last, 'it keeps counting')
  ok('pause / connect x3: memory, process and unsynced files survive')

  // connect of a running sandbox only extends its TTL (200).
  const end0 = (await sbx.getInfo()).endAt
  await Sandbox.connect(id, { timeoutMs: 1000 })
  assert.equal((await sbx.getInfo()).endAt.getTime(), end0.getTime(), 'never shortens')
  ok('connect to a running sandbox never shortens')
} finally {
  await Sandbox.kill(id)
}

// lifecycle.onTimeout: "pause": suspended at the timeout, not killed.
const ap = await Sandbox.create('base', { timeoutMs: 600_000, lifecycle: { onTimeout: 'pause' } })
try {
  assert.equal((await ap.getInfo()).lifecycle?.onTimeout, 'pause')
  await ap.setTimeout(4000)
  await ap.files.write('/home/user/at-timeout.txt', 'written two seconds before the timeout')
  await waitState(ap.sandboxId, 'paused', 120_000)
  const again = await Sandbox.connect(ap.sandboxId)
  assert.equal(await again.files.read('/home/user/at-timeout.txt'),
    'written two seconds before the timeout')
  assert.equal((await again.getInfo()).lifecycle?.onTimeout, 'pause', 'connect keeps autoPause')
  ok('autoPause: suspended at the timeout, restored by connect, the write is there')
} finally {
  await Sandbox.kill(ap.sandboxId)
}
console.log('ok all')
