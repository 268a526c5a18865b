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
      - Watts (V(700), V(700.5), V("700W")), or a percentage of the GPU's default power limit (V("70%")), rounded to
        whole watts.
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
    type: path
    default: /run/nodeprep
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) binary. By default it is searched in E(PATH), C(/usr/bin) and C(/usr/local/bin).
    type: path
notes:
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
      description: PCI bus ID -> managed setting -> value before the run.
      type: dict
    after:
      description: PCI bus ID -> managed setting -> value after the run (predicted in check mode).
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
      description: Managed setting -> value before the run.
      type: dict
    after:
      description: Managed setting -> value after the run (predicted in check mode).
      type: dict
persistenced_running:
  description: Whether the C(nvidia-persistenced) daemon was found running (then C(-pm) is never run).
  returned: always
  type: bool
  sample: false
"""

import json
import math
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six import integer_types, string_types

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._nvsmi import (
    NvidiaSmiParseError,
    find_gpu,
    parse_nvsmi_xml,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._nvidia_collect import (
    CommandTimeout,
    NvidiaCollectError,
    find_nvidia_smi,
    query_xml,
    run_with_timeout,
)

STATE_FILE = 'nvidia_gpu_locks.json'
PERSISTENCED_NAMES = ('nvidia-persistenced', 'nvidia-persiste')
# nvidia-smi can exit 0 and still not apply a setting; these phrases in its output mean it did not.
FAILURE_MARKERS = ('treating as warning', 'not supported', 'unable to', 'failed', 'insufficient permissions',
                   'is not valid', 'invalid', 'error')


class GpuSettingError(Exception):
    def __init__(self, msg, **kwargs):
        super(GpuSettingError, self).__init__(msg)
        self.msg = msg
        self.extra = kwargs


def euid():
    return os.geteuid()


def boot_id(path='/proc/sys/kernel/random/boot_id'):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def persistenced_running(proc='/proc'):
    try:
        entries = os.listdir(proc)
    except OSError:
        return False
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, 'comm')) as handle:
                if handle.read().strip() in PERSISTENCED_NAMES:
                    return True
        except (IOError, OSError):
            continue
    return False


def gpu_label(gpu):
    return 'GPU {0} ({1})'.format(gpu['index'], gpu['pci_bus_id'])


def fmt_watts(value):
    return '{0:.2f}'.format(value)


def watts_arg(value):
    if value == int(value):
        return str(int(value))
    return '{0:.2f}'.format(value)


def _as_int(value, what):
    if isinstance(value, bool):
        raise GpuSettingError('{0} must be an integer number of MHz, got {1!r}'.format(what, value))
    if isinstance(value, integer_types):
        return value
    if isinstance(value, float) and value == int(value):
        return int(value)
    if isinstance(value, string_types) and value.strip().isdigit():
        return int(value.strip())
    raise GpuSettingError('{0} must be an integer number of MHz, got {1!r}'.format(what, value))


def parse_power_limit(value):
    """Return ('watts', float) or ('percent', float)."""
    what = 'power_limit must be watts (e.g. 700) or a percentage of the default limit (e.g. "70%"), got {0!r}'.format(
        value)
    if isinstance(value, bool):
        raise GpuSettingError(what)
    if isinstance(value, integer_types) or isinstance(value, float):
        kind, number = 'watts', float(value)
    elif isinstance(value, string_types):
        text = value.strip()
        kind = 'watts'
        if text.endswith('%'):
            kind, text = 'percent', text[:-1].strip()
        elif text[-1:] in ('W', 'w'):
            text = text[:-1].strip()
        try:
            number = float(text)
        except ValueError:
            raise GpuSettingError(what)
    else:
        raise GpuSettingError(what)
    if math.isnan(number) or number <= 0:
        raise GpuSettingError(what)
    return kind, number


def parse_range(value, name):
    """``reset`` -> None; ``{min, max}`` -> {'min_mhz', 'max_mhz'}."""
    if isinstance(value, string_types) and value.strip().lower() == 'reset':
        return None
    if not isinstance(value, dict) or set(value.keys()) != set(('min', 'max')):
        raise GpuSettingError('{0} must be "reset" or a dict with the keys min and max (MHz), got {1!r}'.format(
            name, value))
    low = _as_int(value['min'], '{0}.min'.format(name))
    high = _as_int(value['max'], '{0}.max'.format(name))
    if low < 1 or low > high:
        raise GpuSettingError('{0}: min ({1}) must be at least 1 and not above max ({2})'.format(name, low, high))
    return {'min_mhz': low, 'max_mhz': high}


def parse_app_clocks(value):
    if isinstance(value, string_types) and value.strip().lower() == 'reset':
        return 'reset'
    if not isinstance(value, dict) or set(value.keys()) != set(('memory', 'graphics')):
        raise GpuSettingError(
            'applications_clocks must be "reset" or a dict with the keys memory and graphics (MHz), got {0!r}'.format(
                value))
    return {'graphics_mhz': _as_int(value['graphics'], 'applications_clocks.graphics'),
            'mem_mhz': _as_int(value['memory'], 'applications_clocks.memory')}


class LockRecord(object):
    """What this module locked, per PCI bus id, valid for the current boot only."""

    def __init__(self, module, state_dir):
        self.module = module
        self.path = os.path.join(state_dir, STATE_FILE)
        self.state_dir = state_dir
        self.boot_id = boot_id()
        self.gpus = {}
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

    def get(self, gpu, setting):
        entry = self.gpus.get(gpu['pci_bus_id'])
        if not isinstance(entry, dict) or entry.get('uuid') != gpu.get('uuid'):
            return None
        return entry.get(setting)

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
        self.planned = []

    # -- helpers ----------------------------------------------------------
    def fail(self, msg, **kwargs):
        self.module.fail_json(msg=msg, commands=self.commands, **kwargs)

    def read_state(self):
        try:
            argv, rc, out, err = query_xml(self.binary, self.params['timeout'])
        except NvidiaCollectError as exc:
            self.fail(**exc.fail_kwargs())
        if rc != 0:
            said = '\n'.join(p.strip() for p in (out, err) if p and p.strip())
            msg = 'nvidia-smi -q -x failed with rc {0}: {1}'.format(rc, said or 'no output')
            if 'insufficient permissions' in said.lower():
                msg += ' (run the task as root, for example with become: true)'
            self.fail(msg, cmd=argv, rc=rc, stdout=out, stderr=err)
        try:
            return parse_nvsmi_xml(out, include_supported_clocks=True)
        except NvidiaSmiParseError as exc:
            self.fail('cannot parse the output of {0}: {1}'.format(' '.join(argv), exc), cmd=argv, rc=rc,
                      stdout=out, stderr=err)

    def select(self, state):
        wanted = [str(g).strip() for g in self.params['gpus']]
        if not wanted:
            self.fail('gpus is empty; give "all" or at least one GPU index, UUID or PCI bus id')
        gpus = state['gpus']
        if not gpus:
            self.fail('nvidia-smi reports no GPUs (attached_gpus: {0})'.format(state['attached_gpus']))
        if any(w.lower() == 'all' for w in wanted):
            if len(wanted) > 1:
                self.fail('gpus: "all" cannot be combined with other entries, got {0}'.format(wanted))
            return list(gpus)
        selected = []
        for ident in wanted:
            gpu = find_gpu(gpus, ident)
            if gpu is None:
                self.fail('gpus: no GPU matches {0!r}; GPUs present: {1}'.format(ident, ', '.join(
                    '{0} ({1}, {2})'.format(g['index'], g['pci_bus_id'], g['uuid']) for g in gpus)))
            if gpu not in selected:
                selected.append(gpu)
        return selected

    def argv(self, gpu, *args):
        return [self.binary, '-i', gpu['pci_bus_id']] + list(args)

    # -- planning ---------------------------------------------------------
    def plan_power(self, gpu, request):
        kind, number = request
        label = gpu_label(gpu)
        current = gpu['power_limit_w']
        low, high = gpu['min_power_limit_w'], gpu['max_power_limit_w']
        if current is None or low is None or high is None:
            raise GpuSettingError('{0}: the power limit is not reported (N/A) by nvidia-smi, so it cannot be '
                                  'managed'.format(label))
        if kind == 'percent':
            default = gpu['default_power_limit_w']
            if default is None:
                raise GpuSettingError('{0}: power_limit {1:g}% needs the default power limit, which nvidia-smi '
                                      'reports as N/A'.format(label, number))
            desired = float(int(default * number / 100.0 + 0.5))
            shown = '{0:g}% of the default {1} W = {2:g} W'.format(number, fmt_watts(default), desired)
        else:
            desired = round(number, 2)
            shown = '{0:g} W'.format(desired)
        if desired < low or desired > high:
            if not self.params['power_limit_clamp']:
                raise GpuSettingError('{0}: power_limit {1} is outside the allowed range {2}-{3} W'.format(
                    label, shown, fmt_watts(low), fmt_watts(high)))
            clamped = low if desired < low else high
            self.module.warn('{0}: power_limit {1} is outside the allowed range {2}-{3} W; clamped to {4} W'.format(
                label, shown, fmt_watts(low), fmt_watts(high), fmt_watts(clamped)))
            desired = clamped
        return desired

    def check_range(self, gpu, name, value, low, high):
        if value is None:
            return
        if (low is not None and value['min_mhz'] < low) or (high is not None and value['max_mhz'] > high):
            raise GpuSettingError('{0}: {1} {2}-{3} MHz is outside the supported range {4}-{5} MHz'.format(
                gpu_label(gpu), name, value['min_mhz'], value['max_mhz'],
                low if low is not None else '?', high if high is not None else '?'))

    def plan_app_clocks(self, gpu, request):
        label = gpu_label(gpu)
        if gpu['applications_clocks_deprecated']:
            raise GpuSettingError(
                '{0}: the driver reports applications clocks as deprecated ("Requested functionality has been '
                'deprecated"); use locked_gpu_clocks and locked_memory_clocks (nvidia-smi -lgc/-lmc) '
                'instead'.format(label))
        if gpu['applications_clocks'] is None:
            raise GpuSettingError('{0}: applications clocks are not supported on this GPU (nvidia-smi reports '
                                  'N/A)'.format(label))
        if request == 'reset':
            if gpu['default_applications_clocks'] is None:
                raise GpuSettingError('{0}: default applications clocks are not reported (N/A), cannot reset '
                                      'them'.format(label))
            return dict(gpu['default_applications_clocks'])
        supported = gpu['supported_clocks'] or {}
        mem_key = str(request['mem_mhz'])
        if mem_key not in supported:
            raise GpuSettingError('{0}: applications_clocks memory {1} MHz is not supported; supported memory '
                                  'clocks: {2}'.format(label, request['mem_mhz'], ', '.join(
                                      sorted(supported, key=int, reverse=True)) or 'none reported'))
        if request['graphics_mhz'] not in supported[mem_key]:
            raise GpuSettingError('{0}: applications_clocks graphics {1} MHz is not supported with memory {2} MHz; '
                                  'supported graphics clocks: {3}'.format(
                                      label, request['graphics_mhz'], request['mem_mhz'],
                                      ', '.join(str(c) for c in supported[mem_key])))
        return request

    def plan_gpu(self, gpu, wanted, record, daemon):
        before, after, commands, readback = {}, {}, [], {}
        label = gpu_label(gpu)
        if wanted.get('persistence_mode') is not None:
            desired = wanted['persistence_mode']
            before['persistence_mode'] = gpu['persistence_mode']
            if daemon:
                after['persistence_mode'] = gpu['persistence_mode']
                if gpu['persistence_mode'] != desired:
                    self.module.warn('{0}: nvidia-persistenced is running and manages persistence mode; the GPU '
                                     'reports {1}, not changing it with nvidia-smi -pm (configure the daemon '
                                     'instead)'.format(label, 'enabled' if gpu['persistence_mode'] else 'disabled'))
            else:
                after['persistence_mode'] = desired
                if gpu['persistence_mode'] != desired:
                    commands.append(self.argv(gpu, '-pm', '1' if desired else '0'))
                    readback['persistence_mode'] = desired
        if wanted.get('power_limit') is not None:
            desired = self.plan_power(gpu, wanted['power_limit'])
            before['power_limit_w'] = gpu['power_limit_w']
            after['power_limit_w'] = desired
            if round(gpu['power_limit_w'], 2) != round(desired, 2):
                commands.append(self.argv(gpu, '-pl', watts_arg(desired)))
                readback['power_limit_w'] = desired
        if wanted.get('applications_clocks') is not None:
            request = wanted['applications_clocks']
            desired = self.plan_app_clocks(gpu, request)
            before['applications_clocks'] = gpu['applications_clocks']
            after['applications_clocks'] = desired
            if gpu['applications_clocks'] != desired:
                if request == 'reset':
                    commands.append(self.argv(gpu, '-rac'))
                else:
                    commands.append(self.argv(gpu, '-ac', '{0},{1}'.format(desired['mem_mhz'],
                                                                           desired['graphics_mhz'])))
                readback['applications_clocks'] = desired
        supported = gpu['supported_clocks'] or {}
        for setting, lock_flag, reset_flag, low, high in (
                ('locked_gpu_clocks', '-lgc', '-rgc',
                 min([c for clocks in supported.values() for c in clocks] or [None]) if supported else None,
                 gpu['max_clocks']['graphics_mhz']),
                ('locked_memory_clocks', '-lmc', '-rmc',
                 min(int(m) for m in supported) if supported else None,
                 gpu['max_clocks']['mem_mhz'])):
            if setting not in wanted:
                continue
            desired = wanted[setting]
            self.check_range(gpu, setting, desired, low, high)
            current = record.get(gpu, setting)
            before[setting] = current
            after[setting] = desired
            if current != desired:
                if desired is None:
                    commands.append(self.argv(gpu, reset_flag))
                else:
                    commands.append(self.argv(gpu, lock_flag, '{0},{1}'.format(desired['min_mhz'],
                                                                               desired['max_mhz'])))
        return before, after, commands, readback

    # -- acting -----------------------------------------------------------
    def run_write(self, argv):
        try:
            rc, out, err = run_with_timeout(argv, self.params['timeout'])
        except CommandTimeout as exc:
            self.fail('{0} did not finish within the timeout of {1} seconds and was killed'.format(
                ' '.join(argv), self.params['timeout']), cmd=argv, rc=None, stdout=exc.stdout, stderr=exc.stderr)
        except OSError as exc:
            self.fail('cannot run {0}: {1}'.format(' '.join(argv), exc), cmd=argv)
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

    def verify(self, readbacks):
        state = self.read_state()
        for gpu, expected in readbacks:
            now = find_gpu(state['gpus'], gpu['pci_bus_id'])
            if now is None:
                self.fail('{0} is gone from nvidia-smi -q -x after changing its settings'.format(gpu_label(gpu)))
            for key, value in sorted(expected.items()):
                got = now[key]
                same = round(got, 2) == round(value, 2) if key == 'power_limit_w' and got is not None else got == value
                if not same:
                    self.fail('{0}: nvidia-smi exited 0 but {1} reads {2!r} instead of {3!r} after the change'.format(
                        gpu_label(gpu), key, got, value))

    def run(self):
        params = self.params
        if params['timeout'] < 1:
            self.fail('timeout must be at least 1 second, got {0}'.format(params['timeout']))
        wanted = {}
        try:
            if params['persistence_mode'] is not None:
                wanted['persistence_mode'] = params['persistence_mode']
            if params['power_limit'] is not None:
                wanted['power_limit'] = parse_power_limit(params['power_limit'])
            for name in ('locked_gpu_clocks', 'locked_memory_clocks'):
                if params[name] is not None:
                    wanted[name] = parse_range(params[name], name)
            if params['applications_clocks'] is not None:
                wanted['applications_clocks'] = parse_app_clocks(params['applications_clocks'])
        except GpuSettingError as exc:
            self.fail(exc.msg)

        self.binary = find_nvidia_smi(self.module, params['nvidia_smi'])
        if self.binary is None:
            self.fail('nvidia-smi not found{0}; install the NVIDIA driver first'.format(
                ' at {0}'.format(params['nvidia_smi']) if params['nvidia_smi'] else ' in PATH'))
        state = self.read_state()
        selected = self.select(state)
        daemon = 'persistence_mode' in wanted and persistenced_running()
        record = LockRecord(self.module, params['state_dir'])

        results, diff_before, diff_after, readbacks = [], {}, {}, []
        try:
            for gpu in selected:
                before, after, commands, readback = self.plan_gpu(gpu, wanted, record, daemon)
                self.planned.extend(commands)
                diff_before[gpu['pci_bus_id']] = before
                diff_after[gpu['pci_bus_id']] = after
                results.append({'index': gpu['index'], 'pci_bus_id': gpu['pci_bus_id'], 'uuid': gpu['uuid'],
                                'changed': bool(commands), 'before': before, 'after': after,
                                'commands': commands})
                if readback:
                    readbacks.append((gpu, readback))
        except GpuSettingError as exc:
            self.fail(exc.msg)

        changed = bool(self.planned)
        if changed and not self.module.check_mode:
            if euid() != 0:
                self.fail('changing GPU settings needs root, but the module runs as uid {0}; use become: true '
                          '(it would run: {1})'.format(euid(), '; '.join(' '.join(c) for c in self.planned)))
            lock_changed = False
            for gpu, result in zip(selected, results):
                for argv in result['commands']:
                    self.run_write(argv)
                    flag = argv[3]
                    if flag in ('-lgc', '-rgc'):
                        record.set(gpu, 'locked_gpu_clocks', result['after']['locked_gpu_clocks'])
                        lock_changed = True
                    elif flag in ('-lmc', '-rmc'):
                        record.set(gpu, 'locked_memory_clocks', result['after']['locked_memory_clocks'])
                        lock_changed = True
            if lock_changed:
                try:
                    record.save()
                except (IOError, OSError) as exc:
                    self.fail('clocks were locked but the record {0} could not be written: {1}'.format(
                        record.path, exc))
            if readbacks:
                self.verify(readbacks)
        for result in results:
            del result['commands']
        return dict(
            changed=changed,
            commands=self.commands,
            planned_commands=self.planned,
            diff=dict(before=diff_before, after=diff_after),
            gpus=results,
            persistenced_running=bool(daemon),
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
            timeout=dict(type='int', default=60),
            state_dir=dict(type='path', default='/run/nodeprep'),
            nvidia_smi=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**NvidiaGpu(module).run())


if __name__ == '__main__':
    main()
