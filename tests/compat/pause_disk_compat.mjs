// The real `e2b` SDK (pinned in package.json) and the pause without memory (issue 12 item 6):
// sbx.pause({ keepMemory: false }) sends {memory: false}: space suspends the disk only (the
// guest syncs, the VM goes); Sandbox.connect() boots it from that disk: every file written
// before the pause is there, also ones never fsync'd, and the processes are gone.
// connect({ onResume: 'reboot' }) (memory: false) drops a memory pause the same way, and
// lifecycle.onTimeout {action: 'pause', keepMemory: false} pauses at the timeout so.
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function waitState(id, want, ms) {
  const deadline = Date.now() + ms
  for (;;) {
    const info = await Sandbox.getInfo(id)
    if (info.state === want) return info
    if (Date.now() > deadline) throw new Error(`${id} never became ${want}: ${info.state}`)
    await sleep(500)
  }
}

// A background process, files written just before the pause (some never synced).
async function prepare(sbx) {
  // "bgloop" in its command line: a pid alone could be reused by the booted guest
  await sbx.commands.run("nohup sh -c 'while :; do sleep 1; done # bgloop' >/dev/null 2>&1 & " +
    'echo $! > /home/user/bg.pid')
  await sbx.files.write('/home/user/unsynced.txt', 'never fsynced')
  await sbx.commands.run('echo synced > /home/user/synced.txt && sync /home/user/synced.txt')
  await sbx.commands.run('head -c 2000000 /dev/urandom > /home/user/big && ' +
    'md5sum /home/user/big > /home/user/big.md5')
  return (await sbx.files.read('/home/user/bg.pid')).trim()
}

async function checkRebooted(sbx, pid) {
  assert.equal(await sbx.files.read('/home/user/unsynced.txt'), 'never fsynced')
  assert.equal((await sbx.files.read('/home/user/synced.txt')).trim(), 'synced')
  await sbx.commands.run('md5sum -c /home/user/big.md5')
  const r = await sbx.commands.run(`grep -q bg[l]oop /proc/${pid}/cmdline 2>/dev/null && ` +
    'echo alive || echo gone')
  assert.equal(r.stdout.trim(), 'gone', 'a reboot from the disk keeps no process')
}

let sbx = await Sandbox.create('base', { timeoutMs: 600_000 })
const id = sbx.sandboxId
try {
  let pid = await prepare(sbx)
  const t0 = Date.now()
  assert.equal(await sbx.pause({ keepMemory: false }), true)
  const paused = Date.now() - t0
  assert.equal(await sbx.pause({ keepMemory: false }), false, 'a second pause is false')
  assert.equal((await Sandbox.getInfo(id)).state, 'paused')
  const t1 = Date.now()
  sbx = await Sandbox.connect(id)
  console.log(`pause (keepMemory: false) ${paused} ms, connect (boot) ${Date.now() - t1} ms`)
  assert.equal((await Sandbox.getInfo(id)).state, 'running')
  await checkRebooted(sbx, pid)
  ok('pause({keepMemory: false}) / connect: files there, processes gone')

  pid = await prepare(sbx)
  await sbx.commands.run('sync')
  assert.equal(await sbx.pause(), true)
  sbx = await Sandbox.connect(id, { onResume: 'reboot' })
  await checkRebooted(sbx, pid)
  ok("connect({onResume: 'reboot'}) of a memory pause boots from the disk")
} finally {
  await Sandbox.kill(id)
}

const ap = await Sandbox.create('base', {
  timeoutMs: 600_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } },
})
try {
  assert.equal((await ap.getInfo()).lifecycle?.onTimeout, 'pause')
  const pid = await prepare(ap)
  await ap.setTimeout(4000)
  await waitState(ap.sandboxId, 'paused', 120_000)
  const again = await Sandbox.connect(ap.sandboxId)
  await checkRebooted(again, pid)
  ok('onTimeout {pause, keepMemory: false}: paused at the timeout without memory')
} finally {
  await Sandbox.kill(ap.sandboxId)
}
console.log('ok all')
