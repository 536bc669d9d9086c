// The real `e2b` SDK (pinned in package.json) and snapshots (issue 12): sbx.createSnapshot()
// (POST /sandboxes/{id}/snapshots) answers {snapshotId, names}; Sandbox.listSnapshots()
// (GET /snapshots, paged by X-Next-Token) lists it, by sandbox and by name;
// Sandbox.create(snapshotId) starts a new sandbox from it (memory and disk), which runs a
// command that sees the source's file and process, under its own identity, and whose writes
// the source never sees; Sandbox.deleteSnapshot() is true, then false.
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)
const COUNTER = 'i=0; while :; do i=$((i+1)); echo $i > /dev/shm/count.tmp; ' +
  'mv /dev/shm/count.tmp /dev/shm/count; sleep 0.2; done'

const src = await Sandbox.create('base', { timeoutMs: 600_000 })
const made = [src]
try {
  await src.files.write('/home/user/branch.txt', 'from the source')
  await src.commands.run(`nohup sh -c '${COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/pid`)

  const snap = await src.createSnapshot({ name: 'compat-snap' })
  assert.equal(typeof snap.snapshotId, 'string')
  assert.deepEqual(snap.names, ['compat-snap'])
  const unnamed = await src.createSnapshot()
  assert.deepEqual(unnamed.names, [])
  ok('createSnapshot')

  const mine = await src.listSnapshots().nextItems()
  assert.deepEqual(mine.map((s) => s.snapshotId), [unnamed.snapshotId, snap.snapshotId])
  const byName = await Sandbox.listSnapshots({ name: 'compat-snap' }).nextItems()
  assert.deepEqual(byName, [{ snapshotId: snap.snapshotId, names: ['compat-snap'] }])
  const pager = Sandbox.listSnapshots({ sandboxId: src.sandboxId, limit: 1 })
  const pages = [...await pager.nextItems()]
  assert.equal(pager.hasNext, true)
  pages.push(...await pager.nextItems())
  assert.equal(pager.hasNext, false)
  assert.deepEqual(pages.map((s) => s.snapshotId), [unnamed.snapshotId, snap.snapshotId])
  ok('listSnapshots')

  const branch = await Sandbox.create(snap.snapshotId, { timeoutMs: 600_000 })
  made.push(branch)
  assert.notEqual(branch.sandboxId, src.sandboxId)
  const seen = await branch.commands.run('cat /home/user/branch.txt; echo; hostname; ' +
    'kill -0 "$(cat /dev/shm/pid)" && echo counter-alive')
  assert.equal(seen.stdout, `from the source\n${branch.sandboxId}\ncounter-alive\n`)
  assert.equal((await Sandbox.getInfo(branch.sandboxId)).templateId, snap.snapshotId)
  await branch.files.write('/home/user/branch.txt', 'changed in the branch')
  assert.equal(await src.files.read('/home/user/branch.txt'), 'from the source')
  ok('Sandbox.create(snapshotId)')

  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
  assert.equal(await Sandbox.deleteSnapshot(unnamed.snapshotId), true)
  assert.deepEqual(await src.listSnapshots().nextItems(), [])
  // The branch does not depend on the snapshot it came from.
  assert.equal(await branch.files.read('/home/user/branch.txt'), 'changed in the branch')
  ok('deleteSnapshot')
} finally {
  for (const s of made) await s.kill()
}
ok('all')
