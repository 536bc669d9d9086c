// Issue 8 points 4, 6 and 7 with the real `e2b` SDK (pinned in package.json), unchanged,
// against space-api, configured only by the E2B_* environment `space up --detach` prints.
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox, CommandExitError, TimeoutError } from 'e2b'

// GET through the ingress with an explicit Host (no wildcard DNS on a test machine).
function getVia(origin, host, path) {
  return new Promise((resolve, reject) => {
    const u = new URL(origin)
    const req = http.get({ hostname: u.hostname, port: u.port, path, headers: { Host: host } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
    })
    req.on('error', reject)
  })
}

const ok = (name) => console.log(`ok ${name}`)
const sleep = (ms) => new Promise((res) => setTimeout(res, ms))
const sbx = await Sandbox.create('base', { timeoutMs: 600_000 })
try {
  // 4: a command past its timeoutMs fails as a timeout (envd: deadline_exceeded) and is killed.
  const t0 = Date.now()
  await assert.rejects(sbx.commands.run('sleep 33', { timeoutMs: 2000 }),
    (e) => e instanceof TimeoutError && !(e instanceof CommandExitError))
  assert.ok(Date.now() - t0 < 15_000)
  let left = true
  for (let i = 0; i < 50 && left; i++) {
    left = (await sbx.commands.list()).some((p) => p.args.some((a) => a.includes('sleep 33')))
    if (left) await sleep(100)
  }
  assert.equal(left, false)
  ok('command past timeoutMs raises TimeoutError and is killed')

  // 6: metadata in user.e2b.<key> xattrs; an overwrite without metadata clears it.
  const f = '/home/user/meta.txt'
  await sbx.files.write(f, 'one', { metadata: { team: 'ai', run: '7' } })
  assert.deepEqual((await sbx.files.getInfo(f)).metadata, { team: 'ai', run: '7' })
  let r = await sbx.commands.run(`python3 -c 'import os; print(*sorted(os.listxattr("${f}")))'`)
  assert.equal(r.stdout, 'user.e2b.run user.e2b.team\n')
  await sbx.files.write(f, 'two')
  assert.equal((await sbx.files.getInfo(f)).metadata, undefined)
  r = await sbx.commands.run(`python3 -c 'import os; print(len(os.listxattr("${f}")))'`)
  assert.equal(r.stdout, '0\n')
  ok('file metadata as user.e2b.* xattrs, cleared by an overwrite')

  // 7: `python` exists, and `python -m http.server` serves through the ingress.
  r = await sbx.commands.run('python --version')
  assert.match(r.stdout, /^Python 3\./)
  await sbx.commands.run('python -m http.server 8124 --directory /home/user', { background: true, timeoutMs: 0 })
  let status = 0
  for (let i = 0; i < 80 && status !== 200; i++) {
    try { status = await getVia(process.env.E2B_SANDBOX_URL, sbx.getHost(8124), '/meta.txt') } catch (e) {}
    if (status !== 200) await sleep(250)
  }
  assert.equal(status, 200)
  ok('python -m http.server')
} finally {
  await sbx.kill()
}
console.log('envd conformance passed')
