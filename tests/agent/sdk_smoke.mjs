// Drives space-agent with the real E2B JS SDK. Without E2B_API_KEY: debug mode, no
// control plane, E2B_SANDBOX_URL points at the agent. With it: a real sandbox made
// through space-api, its agent reached through the ingress. Prints one "ok <name>"
// line per check and exits non-zero on the first failure. Run by test_sdk.py.
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, NotFoundError, TimeoutError } from 'e2b'

const dir = process.argv[2]
const debug = !process.env.E2B_API_KEY
const sbx = debug ? await Sandbox.create({ debug: true }) : await Sandbox.create('base')
const ok = (name) => console.log(`ok ${name}`)
await sbx.commands.run(`mkdir -p ${dir}`)

let r = await sbx.commands.run('echo hello; echo err >&2', { envs: { A: '1' } })
assert.equal(r.stdout, 'hello\n')
assert.equal(r.stderr, 'err\n')
assert.equal(r.exitCode, 0)
ok('commands.run')

r = await sbx.commands.run('echo $A; pwd', { envs: { A: 'x' }, cwd: dir })
assert.equal(r.stdout, `x\n${dir}\n`)
ok('envs and cwd')

await assert.rejects(sbx.commands.run('exit 3'), (e) => e instanceof CommandExitError && e.exitCode === 3)
ok('exit code')

const chunks = []
r = await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.1; done', { onStdout: (d) => chunks.push(d) })
assert.equal(chunks.join(''), '1\n2\n3\n')
ok('streaming output')

const bg = await sbx.commands.run('sleep 30', { background: true })
const procs = await sbx.commands.list()
assert.ok(procs.some((p) => p.pid === bg.pid))
assert.equal(await sbx.commands.kill(bg.pid), true)
assert.equal(await sbx.commands.kill(999999), false)
ok('background, list, kill')

const cat = await sbx.commands.run('cat', { background: true, stdin: true })
await sbx.commands.sendStdin(cat.pid, 'piped\n')
await sbx.commands.closeStdin(cat.pid)
r = await cat.wait()
assert.equal(r.stdout, 'piped\n')
ok('stdin')

const sleeper = await sbx.commands.run('sleep 1; echo late', { background: true })
const again = await sbx.commands.connect(sleeper.pid)
r = await again.wait()
assert.equal(r.stdout, 'late\n')
ok('connect')

// Past its timeoutMs a command ends as on envd: deadline_exceeded, which the SDK raises as a
// TimeoutError (not a CommandExitError for a killed process), and the process is killed.
// (connect-es's own client deadline fires first here; test_process.py checks the server's.)
const t0 = Date.now()
await assert.rejects(sbx.commands.run('sleep 31', { timeoutMs: 1500 }),
  (e) => e instanceof TimeoutError && !(e instanceof CommandExitError))
assert.ok(Date.now() - t0 < 10000)
for (let i = 0; i < 50 && (await sbx.commands.list()).some((p) => p.cmd === '/bin/bash' && p.args.includes('sleep 31')); i++) {
  await new Promise((res) => setTimeout(res, 100))
}
assert.ok(!(await sbx.commands.list()).some((p) => p.args.includes('sleep 31')))
ok('command timeout')

let ptyOut = ''
const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { ptyOut += new TextDecoder().decode(d) } })
await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; exit\n'))
await term.wait().catch(() => {})
assert.ok(ptyOut.includes('30 100'), ptyOut)
ok('pty')

await sbx.files.write(`${dir}/a/b.txt`, 'text content')
assert.equal(await sbx.files.read(`${dir}/a/b.txt`), 'text content')
const bytes = new Uint8Array([0, 1, 2, 255])
await sbx.files.write(`${dir}/bin.dat`, bytes.buffer)
assert.deepEqual(new Uint8Array(await sbx.files.read(`${dir}/bin.dat`, { format: 'bytes' })), bytes)
await sbx.files.write([
  { path: `${dir}/multi/one.txt`, data: '1' },
  { path: `${dir}/multi/two.txt`, data: '2' },
])
assert.equal(await sbx.files.read(`${dir}/multi/two.txt`), '2')
ok('files.write/read')

assert.equal(await sbx.files.exists(`${dir}/a/b.txt`), true)
assert.equal(await sbx.files.exists(`${dir}/nope`), false)
assert.equal(await sbx.files.makeDir(`${dir}/newdir`), true)
assert.equal(await sbx.files.makeDir(`${dir}/newdir`), false)
const entries = await sbx.files.list(dir)
assert.deepEqual(entries.map((e) => e.name).sort(), ['a', 'bin.dat', 'multi', 'newdir'])
const info = await sbx.files.getInfo(`${dir}/a/b.txt`)
assert.equal(info.size, 12)
assert.equal(info.type, 'file')
await sbx.files.rename(`${dir}/a/b.txt`, `${dir}/a/c.txt`)
await sbx.files.remove(`${dir}/multi`)
assert.equal(await sbx.files.exists(`${dir}/multi`), false)
await assert.rejects(sbx.files.read(`${dir}/missing.txt`), (e) => e instanceof NotFoundError)
ok('filesystem')

// Metadata as on envd: user.e2b.<key> xattrs, replaced as a whole by every write.
await sbx.files.write(`${dir}/meta.txt`, 'm', { metadata: { team: 'ai' } })
assert.deepEqual((await sbx.files.getInfo(`${dir}/meta.txt`)).metadata, { team: 'ai' })
r = await sbx.commands.run(`python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.e2b.team").decode())' ${dir}/meta.txt`)
assert.equal(r.stdout, 'ai\n')
await sbx.files.write(`${dir}/meta.txt`, 'overwritten')
assert.equal((await sbx.files.getInfo(`${dir}/meta.txt`)).metadata, undefined)
ok('file metadata')

const events = []
const handle = await sbx.files.watchDir(dir, (e) => events.push(e))
await sbx.files.write(`${dir}/watched.txt`, 'w')
for (let i = 0; i < 50 && !events.some((e) => e.name === 'watched.txt'); i++) {
  await new Promise((res) => setTimeout(res, 100))
}
await handle.stop()
assert.ok(events.some((e) => e.name === 'watched.txt'), JSON.stringify(events))
ok('watchDir')

assert.equal(await sbx.isRunning(), true)
ok('isRunning')
if (!debug) await sbx.kill()
console.log('sdk smoke passed')
