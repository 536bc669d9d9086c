// The real `e2b` SDK (pinned in package.json) against space-api: what it makes of ids that
// do not exist (issue 8 point 1) and of features space does not have (issue 7 "no silent
// drops"): a clear error, never a silent `false` or a silently dropped option.
// With SPACE_CONFORMANCE_VM=1 it also creates a real sandbox with the SDK's defaults.
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import { Sandbox, SandboxError, SandboxNotFoundError, Template, Volume, Secret } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)

// Rejects with an SDK error whose message carries the 501 and names the feature.
async function refused(name, promise, feature) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof Error, `${name}: ${err}`)
    assert.match(String(err.message), /501/, `${name}: ${err.message}`)
    assert.match(String(err.message).toLowerCase(), feature, `${name}: ${err.message}`)
    return true
  })
  ok(name)
}

async function invalid(name, promise, needle) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof Error, `${name}: ${err}`)
    assert.match(String(err.message), /400/, `${name}: ${err.message}`)
    assert.match(String(err.message).toLowerCase(), needle, `${name}: ${err.message}`)
    return true
  })
  ok(name)
}

for (const id of ['nonexistingsandbox', 'a'.repeat(20), 'NOT-AN-ID']) {
  assert.equal(await Sandbox.kill(id), false)
  await assert.rejects(Sandbox.getInfo(id), SandboxNotFoundError)
  await assert.rejects(Sandbox.setTimeout(id, 10_000), SandboxNotFoundError)
  await assert.rejects(Sandbox.connect(id), SandboxNotFoundError)
  await assert.rejects(Sandbox.getMetrics(id), SandboxNotFoundError)
  ok(`missing sandbox ${id}: kill is false, the rest SandboxNotFoundError`)
}

// onTimeout "pause" works (issue 12, pause_compat.mjs), with autoResume too
// (tests/ingress/test_auto_resume.py), and without memory (pause_disk_compat.mjs).
// The egress policy exists (issue 9): a bad entry is refused, naming it.
await invalid('network allowOut', Sandbox.create('base', {
  network: { allowOut: ['a..b'] },
}), /allowout\[0\]/)
await invalid('network denyOut', Sandbox.create('base', {
  network: { denyOut: ['example.com'] },
}), /denyout\[0\]/)
await refused('volumeMounts', Sandbox.create('base', { volumeMounts: { '/data': 'vol' } }),
  /volume/)
await refused('mcp', Sandbox.create({ mcp: { exa: { apiKey: 'x' } } }), /mcp/)

// Routes the SDK reads a 404 from as "false" or "not found" must fail loudly instead.
// Snapshots are served (issue 12, snapshot_compat.mjs): an unknown one is not deleted.
assert.equal(await Sandbox.deleteSnapshot('snap'), false)
ok('deleteSnapshot of an unknown id is false')
assert.deepEqual(await Sandbox.listSnapshots({ sandboxId: 'aaaaaaaaaaaaaaaaaaaa' }).nextItems(), [])
ok('listSnapshots of a sandbox without any is empty')
await refused('Template.exists', Template.exists('my-template'), /alias/)
await refused('Volume.create', Volume.create('vol'), /volume/)
// Secrets are served (test_secrets_compat.py); without --secrets-key nothing can be sealed.
await assert.rejects(Secret.create('s', 'v'), /secrets_unavailable/)
ok('Secret.create without a secrets key')

// Every documented list filter passes the server's check (none is rejected as unknown).
const page = await Sandbox.list({
  query: { metadata: { a: 'b' }, state: ['running', 'paused'], startedAfter: new Date(0),
    template: 'base' },
  limit: 10,
}).nextItems()
assert.ok(Array.isArray(page))
ok('list with every documented filter')

if (process.env.SPACE_CONFORMANCE_VM === '1') {
  // Default options, exactly as a user's first call: nothing the SDK sends is refused.
  const sbx = await Sandbox.create()
  const info = await sbx.getInfo()
  assert.equal(info.state, 'running')
  // Not given, so not echoed (E2B's getInfo too); the E2B default is internet access.
  assert.equal(info.allowInternetAccess, undefined)
  assert.equal(info.network.allowOut, undefined)
  ok('default create works; getInfo echoes the (absent) egress fields')
  assert.equal(await sbx.kill(), true)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  ok('kill is true, then false')
}
console.log('ok all')
