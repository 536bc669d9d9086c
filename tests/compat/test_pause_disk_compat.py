"""The real `e2b` npm SDK and the pause without memory (issue 12 item 6):
pause_disk_compat.mjs pauses with keepMemory: false (a disk-only suspend), connects (a boot
from the disk: files written before there, unsynced ones too, processes gone), connects with
onResume: 'reboot' after a memory pause, and pauses at the timeout with keepMemory: false,
against a real space-api + space-node."""

from lib.platform import Platform
from lib.sdk import run_sdk_script, stop_and_leftovers


def test_e2b_sdk_pause_without_memory():
    p = Platform("pause-disk-compat")
    try:
        p.start()
        run_sdk_script(p, "pause_disk_compat.mjs", timeout=900)
        left = stop_and_leftovers(p)
    finally:
        p.destroy()
    assert not left, left
