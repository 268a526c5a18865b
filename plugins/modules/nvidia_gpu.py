#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_gpu
short_description: Manage NVIDIA GPU persistence mode, power limit and clocks with C(nvidia-smi)
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Reads the state of the selected GPUs with C(nvidia-smi -q -x), computes what differs from the requested settings,
    runs only the C(nvidia-smi) commands needed (one GPU at a time, C(-i <pci_bus_id>)), then reads the state back and
    fails if a GPU did not take a value (C(nvidia-smi) can exit 0 without applying a setting).
  - Settings not given are left alone. A second run with the same options changes nothing.
  - All settings made here are lost at reboot or driver reload; re-apply them at boot (for example from a systemd unit
    or by running the play again).
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
attributes:
  check_mode:
    support: full
    details:
      - Runs only C(nvidia-smi -q -x); reports the commands it would run in RV(planned_commands).
  diff_mode:
    support: full
    details:
      - The diff shows, per GPU, the managed settings before and after.
options:
  gpus:
    description:
      - The GPUs to manage; V(all), or a list of indexes (as C(nvidia-smi) numbers them), UUIDs or PCI bus IDs
        (C(00000000:8F:00.0), C(0000:8f:00.0) and C(8F:00.0) are all accepted).
      - An entry that matches no GPU fails the module, listing the GPUs that exist.
    type: list
    elements: str
    default: [all]
  persistence_mode:
    description:
      - Enable (V(true)) or disable (V(false)) persistence mode with C(nvidia-smi -pm).
      - NVIDIA recommends the C(nvidia-persistenced) daemon instead. When that daemon is running, this module does not
        run C(-pm) at all; it warns if the GPUs report a different mode and leaves the daemon in charge.
    type: bool
  power_limit:
    description:
      - Power management limit, set with C(nvidia-smi -pl).
      - Watts (V(700), V(700.5), V("700W")), or a percentage of the GPU's default power limit (V("70%")).
      - Both are rounded to whole watts, half up (V(700.5) and 50% of a 1001 W default are 501 W); a GPU whose limit is
        within 0.5 W of that counts as set. The readiness check C(gpu.power_limit) and the boot replay use the same
        rule (one Python function).
      - A value outside the GPU's min..max range fails, naming the GPU, the value and the range, unless
        O(power_limit_clamp=true).
    type: raw
  power_limit_clamp:
    description:
      - Clamp an out-of-range O(power_limit) to the GPU's min or max limit (with a warning) instead of failing.
    type: bool
    default: false
  locked_gpu_clocks:
    description:
      - Lock the graphics clock to a range with C(nvidia-smi -lgc min,max), as a dict with C(min) and C(max) in MHz;
        or V(reset) to unlock it with C(nvidia-smi -rgc).
      - The range must lie within the GPU's supported graphics clocks (lowest supported value to the max graphics
        clock).
      - C(nvidia-smi -q -x) does not show locked clocks, so the module records what it applied in a state file under
        O(state_dir) and uses it to decide whether a change is needed. See the notes.
      - V(reset) runs C(-rgc) unless the record says this boot that the clock is unlocked; current clocks are never
        taken as proof of a lock or of its absence.
    type: raw
  locked_memory_clocks:
    description:
      - Lock the memory clock to a range with C(nvidia-smi -lmc min,max) (Ampere and newer), as a dict with C(min)
        and C(max) in MHz; or V(reset) to unlock it with C(nvidia-smi -rmc).
      - The range must lie within the GPU's supported memory clocks. Tracked like O(locked_gpu_clocks).
    type: raw
  applications_clocks:
    description:
      - Set applications clocks with C(nvidia-smi -ac memory,graphics), as a dict with C(memory) and C(graphics) in
        MHz; or V(reset) for C(nvidia-smi -rac).
      - The pair must be one the GPU lists in its supported clocks.
      - Applications clocks are deprecated (drivers 590 and newer print C(Requested functionality has been
        deprecated)); on such drivers the module fails and points to O(locked_gpu_clocks) and
        O(locked_memory_clocks).
    type: raw
  skip_unsupported_applications_clocks:
    description:
      - When a selected GPU reports applications clocks as deprecated or not supported, leave O(applications_clocks)
        alone with a warning instead of failing (what the gpu_settings role does).
    type: bool
    default: false
  apply:
    description:
      - Change the running GPUs. With V(false) the module only computes the commands and writes O(replay_file).
    type: bool
    default: true
  replay_file:
    description:
      - Write the commands that bring the selected GPUs from a fresh boot to the requested state (C(-pm 1) only where
        C(nvidia-persistenced) does not run, C(-pl), C(-lgc), C(-lmc), C(-ac)), as JSON argv lists, to this file. The
        gpu_settings role's boot unit runs them verbatim and records the clock locks it applied in O(state_dir).
      - The file is removed when there is nothing to replay. Not written when V(null).
    type: path
  host_label:
    description:
      - Name of the host used in messages (the role passes C(inventory_hostname)).
    type: str
  timeout:
    description:
      - Seconds to wait for each C(nvidia-smi) command before killing it and failing.
    type: int
    default: 60
  state_dir:
    description:
      - Folder for the record of the clock locks this module applied (C(nvidia_gpu_locks.json)).
      - Keep it on a tmpfs such as C(/run), which is emptied at reboot exactly when the locks are lost. The record also
        stores the boot ID and is ignored after a reboot.
      - The gpu_settings role passes the folder whose record its plan read.
    type: path
    default: /run/nodeprep
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) binary. By default it is searched in E(PATH), C(/usr/bin) and C(/usr/local/bin).
      - The gpu_settings role passes the path the gather read (C(ansible_facts.nvidia.nvidia_smi)), the one its
        plan built the commands and the replay file with.
    type: path
  persistenced:
    description:
      - Whether C(nvidia-persistenced) runs (then C(-pm) is never run, and persistence mode is the daemon's).
      - By default the module looks for itself (a process of that name, or the unit active). The gpu_settings role
        passes what its plan decided with (the gathered state of C(nvidia-persistenced.service)), so that the module
        and the plan judge from the same rule and the same reading.
    type: bool
  driver_pending:
    description:
      - Check mode only. The NVIDIA driver is installed earlier in this same run, so C(nvidia-smi) cannot be found or
        read yet (check mode on a fresh node). Instead of failing, the module predicts from the driver's defaults after
        it loads (persistence mode off, default power limit, clocks unlocked) and reports C(changed) when a requested
        setting differs from them; the result's C(msg) and RV(predicted) say which. A power limit in watts and
        applications clocks count as changes (their defaults are known only once the driver runs), and so does any
        clock lock, V(reset) included (no record of this boot says the clocks are unlocked).
      - Ignored outside check mode and when C(nvidia-smi) can be read.
    type: bool
    default: false
  driver_pending_persistenced:
    description:
      - With O(driver_pending), whether C(nvidia-persistenced) will run once the driver is installed (then persistence
        mode is the daemon's and C(-pm) is never predicted).
    type: bool
    default: false
notes:
  - Power limits, locked clocks and applications clocks are volatile; the driver drops them when it unloads, which
    happens when the last client exits while persistence mode is off and no
    C(nvidia-persistenced) runs. The module refuses to set them in that state and says so. Run C(nvidia-persistenced)
    (the nvidia_driver role does) or set O(persistence_mode=true), which is applied first.
  - An index in O(gpus) is C(nvidia-smi)'s index. When C(nvidia-smi) reports more attached GPUs than it printed (a GPU
    fell off the bus and it exited non-zero), the others keep their indexes, so indexes are refused then and the
    message lists the PCI bus ids to use. The module manages only the GPUs that were printed (RV(partial)).
  - When a write fails after an earlier one succeeded, the module fails with C(changed=true) and RV(commands) lists what
    ran.
  - Changing settings needs root. Without root, or when C(nvidia-smi) answers C(Insufficient Permissions), the module
    fails with a message saying so.
  - Locked clocks cannot be read back. NVML has setters for locked clocks but no getter, and C(nvidia-smi -q -x) has no
    element for them (C(clocks_event_reasons) only shows the lock while it actually holds the clock down). The module
    therefore trusts C(nvidia-smi)'s exit status and messages for C(-lgc)/C(-lmc), and records what it applied in
    O(state_dir). A lock set by hand, or cleared by a driver reload without a reboot, is not seen; run with V(reset)
    and then the wanted range to force a known state.
seealso:
  - module: gpufleet.nodeprep.nvidia_gpu_facts
"""

EXAMPLES = r"""
- name: Persistence on, power limit at 70 % of default, graphics clock locked, on all GPUs
  gpufleet.nodeprep.nvidia_gpu:
    persistence_mode: true
    power_limit: "70%"
    locked_gpu_clocks:
      min: 1500
      max: 1965

- name: Power limit of 700 W on two GPUs, clamped to what each GPU allows
  gpufleet.nodeprep.nvidia_gpu:
    gpus: ["00000000:8F:00.0", "1"]
    power_limit: 700
    power_limit_clamp: true

- name: Unlock clocks again
  gpufleet.nodeprep.nvidia_gpu:
    locked_gpu_clocks: reset
    locked_memory_clocks: reset

- name: Applications clocks on an older driver (validated against the supported clocks)
  gpufleet.nodeprep.nvidia_gpu:
    applications_clocks:
      memory: 2619
      graphics: 1980
"""

RETURN = r"""
commands:
  description: The C(nvidia-smi) commands the module ran, as argv lists, in order (empty in check mode).
  returned: always
  type: list
  elements: list
  sample: [["/usr/bin/nvidia-smi", "-i", "00000000:8F:00.0", "-pl", "700"]]
planned_commands:
  description: The C(nvidia-smi) commands needed to reach the requested state (the same as RV(commands) outside check
    mode).
  returned: always
  type: list
  elements: list
  sample: [["/usr/bin/nvidia-smi", "-i", "00000000:8F:00.0", "-pl", "700"]]
diff:
  description: Managed settings of each selected GPU (keyed by PCI bus ID) before and after.
  returned: always
  type: dict
  sample:
    before: {"00000000:8F:00.0": {"power_limit_w": 1000.0}}
    after: {"00000000:8F:00.0": {"power_limit_w": 700.0}}
  contains:
    before:
      description:
        - PCI bus ID -> managed setting -> value before the run.
        - 'C([<pci_bus_id>]) (dict): One entry per selected GPU.'
        - 'C([<pci_bus_id>][<setting>]) (raw): One managed setting (V(persistence_mode), V(power_limit_w),
          V(locked_clocks), ...) and its value.'
      type: dict
    after:
      description:
        - PCI bus ID -> managed setting -> value after the run (predicted in check mode).
        - 'C([<pci_bus_id>]) (dict): One entry per selected GPU.'
        - 'C([<pci_bus_id>][<setting>]) (raw): One managed setting (V(persistence_mode), V(power_limit_w),
          V(locked_clocks), ...) and its value.'
      type: dict
gpus:
  description: Per-GPU outcome for the selected GPUs.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      pci_bus_id: "00000000:8F:00.0"
      uuid: "GPU-00000000-0000-0000-0000-000000000000"
      changed: true
      before: {power_limit_w: 1000.0}
      after: {power_limit_w: 700.0}
  contains:
    index:
      description: The GPU's index as nvidia-smi numbers it.
      type: int
    pci_bus_id:
      description: The GPU's PCI bus ID as nvidia-smi prints it.
      type: str
    uuid:
      description: The GPU's UUID.
      type: str
    changed:
      description: Whether any setting of this GPU changed (would change, in check mode).
      type: bool
    before:
      description:
        - Managed setting -> value before the run.
        - 'C([<setting>]) (raw): One managed setting (V(persistence_mode), V(power_limit_w), V(locked_clocks), ...) and
          its value.'
      type: dict
    after:
      description:
        - Managed setting -> value after the run (predicted in check mode).
        - 'C([<setting>]) (raw): One managed setting (V(persistence_mode), V(power_limit_w), V(locked_clocks), ...) and
          its value.'
      type: dict
replay:
  description: The replay file's content (V(null) without O(replay_file) or when there is nothing to replay).
  returned: always
  type: dict
  sample:
    version: 1
    commands: [["/usr/bin/nvidia-smi", "-i", "00000000:8F:00.0", "-pl", "670"]]
    record_path: /run/nodeprep/nvidia_gpu_locks.json
    locks: {}
  contains:
    version:
      description: Format version of the replay file.
      type: int
    commands:
      description: The C(nvidia-smi) argv lists the boot unit runs, in order.
      type: list
      elements: list
    record_path:
      description: Where the boot unit records the clock locks it applied.
      type: str
    locks:
      description:
        - The clock locks to apply, keyed by PCI bus ID.
        - 'C([<pci_bus_id>]) (dict): The GPU''s locked clock settings (V(locked_gpu_clocks), V(locked_memory_clocks) as
          C([min, max]) MHz) and its C(uuid).'
      type: dict
replay_changed:
  description: Whether O(replay_file) was (or, in check mode, would be) written or removed.
  returned: always
  type: bool
  sample: false
partial:
  description: Whether C(nvidia-smi -q -x) exited non-zero after printing its XML (a GPU lost); only the printed GPUs
    are managed.
  returned: always
  type: bool
  sample: false
persistenced_running:
  description: Whether the C(nvidia-persistenced) daemon was found running (then C(-pm) is never run).
  returned: always
  type: bool
  sample: false
predicted:
  description:
    - With O(driver_pending) in check mode when the GPUs could not be read, the settings predicted to change once the
      driver loads (one sentence each); empty otherwise.
  returned: always
  type: list
  elements: str
  sample: ["power limit 72.5%: the driver starts at the default limit"]
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import (
    NvidiaSmiParseError,
    parse_nvsmi_xml,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nvidia_smi import (
    NvidiaCollectError,
    find_nvidia_smi,
    query_xml,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import CommandNotFound, run
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._gpu_settings import (
    GpuSettingsError,
    LOCKS,
    find_by_bus_id,
    fresh_driver_changes,
    gpu_label,
    known_locks,
    parse_settings,
    plan_settings,
    power_limit_matches,
    replay_text,
    LOCK_RECORD as STATE_FILE,
)

PERSISTENCED_NAMES = ('nvidia-persistenced', 'nvidia-persiste')
PERSISTENCED_UNIT = 'nvidia-persistenced.service'
# nvidia-smi can exit 0 and still not apply a setting; these phrases in its output mean it did not.
FAILURE_MARKERS = ('treating as warning', 'not supported', 'unable to', 'failed', 'insufficient permissions',
                   'is not valid', 'invalid', 'error')


def euid():
    return os.geteuid()


def boot_id(path='/proc/sys/kernel/random/boot_id'):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def persistenced_running(proc='/proc', systemctl=None, module=None):
    """Whether nvidia-persistenced runs: a process of that name, or (when ``systemctl`` is given) its unit active.

    The unit state also covers a daemon whose process has another name (the simulated fleet's runs as gpu-double).
    """
    try:
        entries = os.listdir(proc)
    except OSError:
        entries = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, 'comm')) as handle:
                if handle.read().strip() in PERSISTENCED_NAMES:
                    return True
        except (IOError, OSError):
            continue
    if systemctl and module is not None:
        try:
            result = run(module, [systemctl, 'is-active', PERSISTENCED_UNIT], timeout=30)
        except CommandNotFound:
            return False
        return not result.timed_out and result.rc == 0 and result.stdout.strip() == 'active'
    return False


class LockRecord(object):
    """The clock locks applied this boot, per PCI bus id, by this module or by the boot unit's replay.

    A GPU (or a setting) missing from the record is in an unknown state: a reset is then run, never skipped.
    """

    def __init__(self, module, state_dir):
        self.module = module
        self.path = os.path.join(state_dir, STATE_FILE)
        self.state_dir = state_dir
        self.boot_id = boot_id()
        self.gpus = {}
        self.data = None
        try:
            with open(self.path) as handle:
                data = json.load(handle)
        except (IOError, OSError):
            return
        except ValueError as exc:
            module.warn('ignoring unreadable lock record {0}: {1}'.format(self.path, exc))
            return
        if isinstance(data, dict) and data.get('boot_id') == self.boot_id and isinstance(data.get('gpus'), dict):
            self.gpus = data['gpus']
            self.data = data

    def known(self, gpu):
        """{setting: value} known for this GPU this boot (a missing setting is unknown)."""
        return known_locks(self.data, self.boot_id, gpu)

    def set(self, gpu, setting, value):
        entry = self.gpus.get(gpu['pci_bus_id'])
        if not isinstance(entry, dict) or entry.get('uuid') != gpu.get('uuid'):
            entry = {'uuid': gpu.get('uuid')}
            self.gpus[gpu['pci_bus_id']] = entry
        entry[setting] = value

    def save(self):
        if not os.path.isdir(self.state_dir):
            os.makedirs(self.state_dir, 0o755)
        fd, tmp = tempfile.mkstemp(prefix='.nvidia_gpu_locks.', dir=self.state_dir)
        with os.fdopen(fd, 'w') as handle:
            json.dump({'boot_id': self.boot_id, 'gpus': self.gpus}, handle, indent=2, sort_keys=True)
            handle.write('\n')
        self.module.atomic_move(tmp, self.path)


class NvidiaGpu(object):
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.binary = None
        self.commands = []
        self.applied = 0
        self.planned = []

    # -- helpers ----------------------------------------------------------
    def fail(self, msg, **kwargs):
        # A write that already succeeded changed the node, even when a later one fails.
        self.module.fail_json(msg=msg, commands=self.commands, changed=self.applied > 0, **kwargs)

    def read_state(self):
        try:
            argv, rc, out, err = query_xml(self.module, self.binary, self.params['timeout'])
        except NvidiaCollectError as exc:
            self.fail(**exc.fail_kwargs())
        said = '\n'.join(p.strip() for p in (out, err) if p and p.strip())
        if rc != 0 and '<nvidia_smi_log' not in (out or ''):
            msg = 'nvidia-smi -q -x failed with rc {0}: {1}'.format(rc, said or 'no output')
            if 'insufficient permissions' in said.lower():
                msg += ' (run the task as root, for example with become: true)'
            self.fail(msg, cmd=argv, rc=rc, stdout=out, stderr=err)
        try:
            state = parse_nvsmi_xml(out)
        except NvidiaSmiParseError as exc:
            self.fail('cannot parse the output of nvidia-smi -q -x (rc {0}): {1}'.format(rc, exc),
                      cmd=argv, rc=rc, stdout=out, stderr=err)
        state['partial'] = rc != 0
        state['error'] = ((err or '').strip() or 'rc {0}'.format(rc)) if rc != 0 else None
        return state

    def readable(self):
        """Whether nvidia-smi -q -x can be run and prints its XML (without failing the module)."""
        if self.binary is None:
            return False
        try:
            dummy, rc, out, dummy2 = query_xml(self.module, self.binary, self.params['timeout'])
        except NvidiaCollectError:
            return False
        return '<nvidia_smi_log' in (out or '')

    def predict_fresh(self, wanted):
        """Check mode, driver installed earlier in this run: predict from the driver's defaults (one rule, in
        _gpu_settings.fresh_driver_changes)."""
        params = self.params
        host = params['host_label']
        changes = fresh_driver_changes(wanted, params['driver_pending_persistenced'])
        live = params['apply']
        changed = bool(changes) and (live or bool(params['replay_file']))
        where = ' on {0}'.format(host) if host else ''
        if changed:
            msg = ('Check mode: the NVIDIA driver is installed in this run and the GPUs cannot be read yet{0}; once it '
                   'loads they are at its defaults, so the settings will change: {1}'.format(where, '; '.join(changes)))
        else:
            msg = ('Check mode: the NVIDIA driver is installed in this run and the GPUs cannot be read yet{0}; the '
                   'requested settings are the driver\'s defaults, so nothing will change'.format(where))
        return dict(changed=changed, msg=msg, commands=[], planned_commands=[], replay=None,
                    replay_changed=changed and bool(params['replay_file']), diff=dict(before={}, after={}), gpus=[],
                    partial=False, persistenced_running=False, predicted=changes if changed else [])

    def argv(self, gpu, *args):
        return [self.binary, '-i', gpu['pci_bus_id']] + list(args)

    # -- acting -----------------------------------------------------------
    def run_write(self, argv):
        try:
            result = run(self.module, argv, timeout=self.params['timeout'])
        except CommandNotFound as exc:
            self.fail(str(exc), cmd=argv)
        if result.timed_out:
            self.fail('{0} did not finish within the timeout of {1} seconds and was killed'.format(
                ' '.join(argv), self.params['timeout']), cmd=argv, rc=None, stdout=result.stdout,
                stderr=result.stderr)
        rc, out, err = result.rc, result.stdout, result.stderr
        self.commands.append(argv)
        said = '\n'.join(p.strip() for p in (out, err) if p and p.strip())
        lowered = said.lower()
        if 'insufficient permissions' in lowered or 'requires root' in lowered or 'permission' in lowered:
            self.fail('{0} was refused: {1} (changing GPU settings needs root; use become: true)'.format(
                ' '.join(argv), said), cmd=argv, rc=rc, stdout=out, stderr=err)
        if rc != 0:
            self.fail('{0} failed with rc {1}: {2}'.format(' '.join(argv), rc, said or 'no output'),
                      cmd=argv, rc=rc, stdout=out, stderr=err)
        # Ignore nvidia-smi's routine "persistence mode is disabled" warning when looking for failures.
        lines = [line for line in lowered.splitlines() if 'persistence mode is disabled' not in line]
        if any(marker in line for line in lines for marker in FAILURE_MARKERS):
            self.fail('{0} exited 0 but reported a problem: {1}'.format(' '.join(argv), said),
                      cmd=argv, rc=rc, stdout=out, stderr=err)
        self.applied += 1

    def verify(self, readbacks):
        state = self.read_state()
        for gpu, expected in readbacks:
            now = find_by_bus_id(state['gpus'], gpu['pci_bus_id'])
            if now is None:
                self.fail('{0} is gone from nvidia-smi -q -x after changing its settings'.format(gpu_label(gpu)))
            for key, value in sorted(expected.items()):
                got = now[key]
                same = power_limit_matches(got, value) if key == 'power_limit_w' else got == value
                if not same:
                    self.fail('{0}: nvidia-smi exited 0 but {1} reads {2!r} instead of {3!r} after the change'.format(
                        gpu_label(gpu), key, got, value))

    def write_replay(self, replay):
        """Write (or remove, when None) the replay file; returns whether it changed."""
        path = self.params['replay_file']
        try:
            with open(path) as handle:
                current = handle.read()
        except (IOError, OSError):
            current = None
        wanted = None if replay is None else replay_text(replay)
        if current == wanted:
            return False
        if self.module.check_mode:
            return True
        try:
            if wanted is None:
                os.remove(path)
                return True
            folder = os.path.dirname(path) or '.'
            fd, tmp = tempfile.mkstemp(prefix='.gpu-settings.', dir=folder)
            with os.fdopen(fd, 'w') as handle:
                handle.write(wanted)
            os.chmod(tmp, 0o644)
            self.module.atomic_move(tmp, path)
        except (IOError, OSError) as exc:
            self.fail('cannot write the replay file {0}: {1}'.format(path, exc))
        return True

    def run(self):
        params = self.params
        host = params['host_label']
        if params['timeout'] < 1:
            self.fail('timeout must be at least 1 second, got {0}'.format(params['timeout']))
        try:
            wanted = parse_settings(params)
        except GpuSettingsError as exc:
            self.fail(exc.msg)

        self.binary = find_nvidia_smi(self.module, params['nvidia_smi'])
        if params['driver_pending'] and self.module.check_mode and not self.readable():
            return self.predict_fresh(wanted)
        if self.binary is None:
            self.fail('nvidia-smi not found{0}; install the NVIDIA driver first'.format(
                ' at {0}'.format(params['nvidia_smi']) if params['nvidia_smi'] else ' in PATH'))
        state = self.read_state()
        if state['partial']:
            self.module.warn('nvidia-smi -q -x exited non-zero after printing {0} of {1} GPUs ({2}); only the GPUs '
                             'it printed are managed'.format(len(state['gpus']), state['attached_gpus'],
                                                             state['error']))
        daemon = params['persistenced']
        if daemon is None:
            daemon = persistenced_running(systemctl=self.module.get_bin_path('systemctl'), module=self.module)
        record = LockRecord(self.module, params['state_dir'])
        try:
            decided = plan_settings(state, wanted, params['gpus'], record.known, daemon, self.argv,
                                    params['power_limit_clamp'], host,
                                    params['skip_unsupported_applications_clocks'],
                                    record.path if params['replay_file'] else None)
        except GpuSettingsError as exc:
            self.fail(exc.msg)
        for warning in decided['warnings']:
            self.module.warn(warning)
        selected, plans, replay = decided['selected'], decided['plans'], decided['replay']
        self.planned.extend(decided['planned'])
        results, diff_before, diff_after, readbacks = [], {}, {}, []
        for gpu, plan in zip(selected, plans):
            for warning in plan['warnings']:
                self.module.warn(warning)
            diff_before[gpu['pci_bus_id']] = plan['before']
            diff_after[gpu['pci_bus_id']] = plan['after']
            results.append({'index': gpu['index'], 'pci_bus_id': gpu['pci_bus_id'], 'uuid': gpu['uuid'],
                            'changed': bool(plan['commands']), 'before': plan['before'], 'after': plan['after']})
            if plan['readback']:
                readbacks.append((gpu, plan['readback']))

        live = params['apply']
        changed = bool(self.planned) and live
        if changed and not self.module.check_mode:
            if euid() != 0:
                self.fail('changing GPU settings needs root, but the module runs as uid {0}; use become: true '
                          '(it would run: {1})'.format(euid(), '; '.join(' '.join(c) for c in self.planned)))
            lock_changed = False
            try:
                for gpu, plan in zip(selected, plans):
                    for argv in plan['commands']:
                        self.run_write(argv)
                        for setting, lock_flag, reset_flag in LOCKS:
                            if argv[3] in (lock_flag, reset_flag):
                                record.set(gpu, setting, plan['after'][setting])
                                lock_changed = True
            finally:
                if lock_changed:
                    try:
                        record.save()
                    except (IOError, OSError) as exc:
                        self.fail('clocks were locked but the record {0} could not be written: {1}'.format(
                            record.path, exc))
            if readbacks:
                self.verify(readbacks)
        replay_changed = self.write_replay(replay) if params['replay_file'] else False
        return dict(
            changed=changed or replay_changed,
            commands=self.commands,
            planned_commands=self.planned if live else [],
            replay=replay,
            replay_changed=replay_changed,
            diff=dict(before=diff_before, after=diff_after),
            gpus=results,
            partial=state['partial'],
            persistenced_running=bool(daemon),
            predicted=[],
        )


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type='list', elements='str', default=['all']),
            persistence_mode=dict(type='bool'),
            power_limit=dict(type='raw'),
            power_limit_clamp=dict(type='bool', default=False),
            locked_gpu_clocks=dict(type='raw'),
            locked_memory_clocks=dict(type='raw'),
            applications_clocks=dict(type='raw'),
            skip_unsupported_applications_clocks=dict(type='bool', default=False),
            apply=dict(type='bool', default=True),
            replay_file=dict(type='path'),
            host_label=dict(type='str'),
            timeout=dict(type='int', default=60),
            state_dir=dict(type='path', default='/run/nodeprep'),
            nvidia_smi=dict(type='path'),
            persistenced=dict(type='bool'),
            driver_pending=dict(type='bool', default=False),
            driver_pending_persistenced=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**NvidiaGpu(module).run())


if __name__ == '__main__':
    main()
