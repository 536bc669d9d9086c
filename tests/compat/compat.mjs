// The real `e2b` SDK (pinned in package.json), unchanged, against space-api.
// Configuration comes only from the environment, exactly as `eval "$(space up --detach)"`
// leaves it: E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN, E2B_API_KEY.
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox, CommandExitError, NotFoundError } from 'e2b'

// GET through the ingress with an explicit Host (no wildcard DNS on a test machine).
function getVia(origin, host, path) {
  return new Promise((resolve, reject) => {
    const u = new URL(origin)
    const req = http.get({ hostname: u.hostname, port: u.port, path, headers: { Host: host } }, (res) => {
      const parts = []
      res.on('data', (d) => parts.push(d))
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(parts) }))
    })
    req.on('error', reject)
  })
}

const ok = (name) => console.log(`ok ${name}`)
const runId = `r${Date.now()}`

const sbx = await Sandbox.create('base', {
  metadata: { run: runId, suite: 'compat' },
  envs: { SANDBOX_WIDE: 'yes' },
  timeoutMs: 120_000,
})
ok('create')

try {
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, 'base')
  assert.deepEqual(info.metadata, { run: runId, suite: 'compat' })
  ok('getInfo')

  const found = []
  const pager = Sandbox.list({ query: { metadata: { run: runId }, state: ['running'] } })
  while (pager.hasNext) {
    for (const s of await pager.nextItems()) found.push(s.sandboxId)
  }
  assert.deepEqual(found, [sbx.sandboxId])
  ok('list with filters')

  assert.equal(await sbx.isRunning(), true)
  ok('isRunning')

  let r = await sbx.commands.run('echo $SANDBOX_WIDE $A; echo err >&2', { envs: { A: '1' } })
  assert.equal(r.stdout, 'yes 1\n')
  assert.equal(r.stderr, 'err\n')
  assert.equal(r.exitCode, 0)
  ok('commands.run foreground')

  await assert.rejects(sbx.commands.run('exit 3'), (e) => e instanceof CommandExitError && e.exitCode === 3)
  ok('exit code')

  const chunks = []
  r = await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.2; done', { onStdout: (d) => chunks.push(d) })
  assert.equal(chunks.join(''), '1\n2\n3\n')
  ok('streaming callbacks')

  const bg = await sbx.commands.run('sleep 60', { background: true })
  assert.ok((await sbx.commands.list()).some((p) => p.pid === bg.pid))
  assert.equal(await sbx.commands.kill(bg.pid), true)
  ok('background and kill')

  const cat = await sbx.commands.run('cat', { background: true, stdin: true })
  await sbx.commands.sendStdin(cat.pid, 'piped\n')
  await sbx.commands.closeStdin(cat.pid)
  assert.equal((await cat.wait()).stdout, 'piped\n')
  ok('stdin')

  await sbx.files.write('/home/user/dir/a.txt', 'text content')
  assert.equal(await sbx.files.read('/home/user/dir/a.txt'), 'text content')
  const big = new Uint8Array(1 << 20)
  for (let i = 0; i < big.length; i++) big[i] = (i * 31 + 7) & 255
  await sbx.files.write('/home/user/big.bin', big.buffer)
  const back = await sbx.files.read('/home/user/big.bin', { format: 'bytes' })
  assert.equal(back.length, big.length)
  assert.ok(Buffer.from(back).equals(Buffer.from(big)))
  ok('files text and binary 1 MiB')

  assert.equal(await sbx.files.exists('/home/user/dir/a.txt'), true)
  assert.equal(await sbx.files.exists('/home/user/nope'), false)
  assert.equal(await sbx.files.makeDir('/home/user/made/deep'), true)
  const names = (await sbx.files.list('/home/user/dir')).map((e) => e.name)
  assert.deepEqual(names, ['a.txt'])
  await sbx.files.rename('/home/user/dir/a.txt', '/home/user/dir/b.txt')
  assert.equal(await sbx.files.exists('/home/user/dir/b.txt'), true)
  await sbx.files.remove('/home/user/dir/b.txt')
  assert.equal(await sbx.files.exists('/home/user/dir/b.txt'), false)
  await assert.rejects(sbx.files.read('/home/user/nope'), (e) => e instanceof NotFoundError)
  ok('files list exists makeDir rename remove')

  const events = []
  const watcher = await sbx.files.watchDir('/home/user/made', (e) => events.push(e))
  await sbx.files.write('/home/user/made/new.txt', 'x')
  for (let i = 0; i < 50 && !events.some((e) => e.name === 'new.txt'); i++) {
    await new Promise((res) => setTimeout(res, 100))
  }
  await watcher.stop()
  assert.ok(events.some((e) => e.name === 'new.txt'), JSON.stringify(events))
  ok('watchDir')

  await sbx.commands.run("nohup python3 -m http.server 8000 --directory /home/user >/dev/null 2>&1 &")
  const host = sbx.getHost(8000)
  assert.equal(host, `8000-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`)
  let body = ''
  for (let i = 0; i < 60; i++) {
    try {
      const res = await getVia(process.env.E2B_SANDBOX_URL, host, '/big.bin')
      if (res.status === 200) { body = res.body; break }
    } catch (e) {}
    await new Promise((res) => setTimeout(res, 250))
  }
  assert.equal(body.length, 1 << 20)
  ok('getHost and fetch from a server in the sandbox')

  await sbx.setTimeout(300_000)
  const after = await sbx.getInfo()
  assert.ok(after.endAt.getTime() - Date.now() > 200_000)
  ok('setTimeout')
} finally {
  assert.equal(await sbx.kill(), true)
}
ok('kill')
assert.equal(await Sandbox.kill(sbx.sandboxId), false)
await assert.rejects(Sandbox.connect(sbx.sandboxId), () => true)
ok('killed sandbox is gone')
