# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared state of the GPU double (simulated fleet only, never shipped to real nodes).

Everything the double knows lives in a few files inside the node:

* ``/etc/testbed/hardware.json``   the hardware profile (fixed numbers from real captures)
* ``/run/gpu-double/state.json``   simulated device state (driver loaded?, persistence, limits, clocks);
                                   ``/run`` is a tmpfs, so the state is lost at reboot like the driver's
* ``/var/lib/testbed/faults/*``    injected faults (a host folder bound into the node)
* ``/run/gpu-double/kernel.log``   the simulated kernel log (driver load messages, Xid events)

Set ``GPU_DOUBLE_ROOT`` to run against a scratch tree (tests), ``GPU_DOUBLE_UNAME_R`` to fake
``uname -r`` and ``GPU_DOUBLE_EUID`` to fake the effective user id.
Plain Python 3 standard library; keep imports cheap, nvidia-smi is called often.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import re
import time

PROFILE = 'etc/testbed/hardware.json'
RUN_DIR = 'run/gpu-double'
FAULT_DIR = 'var/lib/testbed/faults'
LIB_DIR = 'usr/lib/gpu-double'

# Fault flag files (names are the contract with tests/testbed/testbed.py `fault`/`heal`).
FAULT_GPU_MISSING = 'gpu-missing'            # optional content: index or PCI bus id; default: last GPU
FAULT_SMI_HANG = 'nvidia-smi-hang'            # nvidia-smi sleeps forever
FAULT_DRIVER_UNLOADED = 'driver-unloaded'     # driver answers as not loaded; /proc/driver/nvidia gone
FAULT_XID = 'xid'                             # lines "<xid> [<index|bus id>]"; default GPU 0
FAULT_RETIRED_PAGES = 'retired-pages-pending'  # optional content: indexes/bus ids, one a line; default all
FAULT_REMAPPED_ROWS = 'remapped-rows-pending'  # same
FAULT_NAMES = (FAULT_GPU_MISSING, FAULT_SMI_HANG, FAULT_DRIVER_UNLOADED, FAULT_XID,
               FAULT_RETIRED_PAGES, FAULT_REMAPPED_ROWS)

CUDA_BY_BRANCH = {'570': '12.8', '575': '12.9', '580': '13.0', '590': '13.1', '595': '13.2'}
# Architectures that only work with the open kernel modules.
OPEN_ONLY_ARCHITECTURES = ('Blackwell', 'Rubin')

XID_TEXT = {
    '13': 'Graphics Engine Exception',
    '31': 'MMU Fault',
    '43': 'Reset Channel Verif Error',
    '48': 'An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer',
    '63': 'Row remapping event',
    '64': 'Row remapping failure',
    '74': 'NVLink Error',
    '79': 'GPU has fallen off the bus.',
    '94': 'Contained ECC error',
    '95': 'Uncontained ECC error',
}


class DoubleError(Exception):
    """Raised when the simulated node is set up wrongly (missing or bad profile)."""


def root():
    return os.environ.get('GPU_DOUBLE_ROOT', '/')


def path(rel):
    return os.path.join(root(), rel)


def uname_r():
    return os.environ.get('GPU_DOUBLE_UNAME_R') or os.uname()[2]


def euid():
    val = os.environ.get('GPU_DOUBLE_EUID')
    return int(val) if val not in (None, '') else os.geteuid()


def read_text(rel, default=None):
    try:
        with open(path(rel)) as f:
            return f.read()
    except (IOError, OSError):
        return default


def write_text(rel, text):
    target = path(rel)
    d = os.path.dirname(target)
    if not os.path.isdir(d):
        os.makedirs(d)
    tmp = '{0}.tmp{1}'.format(target, os.getpid())
    with open(tmp, 'w') as f:
        f.write(text)
    os.rename(tmp, target)


def load_profile():
    text = read_text(PROFILE)
    if text is None:
        raise DoubleError('hardware profile {0} is missing'.format(path(PROFILE)))
    try:
        return json.loads(text)
    except ValueError as exc:
        raise DoubleError('hardware profile {0} is not valid JSON: {1}'.format(path(PROFILE), exc))


# ---------------------------------------------------------------- faults

def fault_active(name):
    return os.path.exists(path(os.path.join(FAULT_DIR, name)))


def fault_lines(name):
    text = read_text(os.path.join(FAULT_DIR, name), '') or ''
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith('#')]


def _match_gpu(gpus, ident):
    ident = ident.strip()
    for gpu in gpus:
        if ident == str(gpu['index']) or ident.lower() == gpu['uuid'].lower() \
                or normalize_bus_id(ident) == gpu['pci_bus_id']:
            return gpu
    return None


def normalize_bus_id(text):
    """'8f:00.0', '0000:8F:00.0', '00000000:8f:00.0' -> '00000000:8F:00.0' (None if not a bus id)."""
    m = re.match(r'^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$', text.strip())
    if not m:
        return None
    return '{0:08X}:{1:02X}:{2:02X}.{3}'.format(int(m.group(1) or '0', 16), int(m.group(2), 16),
                                                int(m.group(3), 16), int(m.group(4)))


def sysfs_bus_id(bus_id):
    """'00000000:8F:00.0' -> '0000:8f:00.0' (the form /sys/bus/pci/devices uses)."""
    return bus_id[4:].lower()


def present_gpus(profile):
    """GPUs visible on the PCI bus (the gpu-missing fault removes one)."""
    gpus = list(profile['gpus'])
    if fault_active(FAULT_GPU_MISSING) and gpus:
        lines = fault_lines(FAULT_GPU_MISSING)
        gone = [_match_gpu(gpus, line) for line in lines] if lines else [gpus[-1]]
        gone_ids = set(g['pci_bus_id'] for g in gone if g)
        gpus = [g for g in gpus if g['pci_bus_id'] not in gone_ids]
    return gpus


def flagged_gpus(profile, name):
    """Bus ids named in a fault file (all present GPUs when the file is empty)."""
    if not fault_active(name):
        return set()
    gpus = present_gpus(profile)
    lines = fault_lines(name)
    if not lines:
        return set(g['pci_bus_id'] for g in gpus)
    return set(g['pci_bus_id'] for g in (_match_gpu(gpus, line) for line in lines) if g)


# ---------------------------------------------------------------- state

def load_state():
    text = read_text(os.path.join(RUN_DIR, 'state.json'))
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def save_state(state):
    write_text(os.path.join(RUN_DIR, 'state.json'), json.dumps(state, indent=1, sort_keys=True) + '\n')


def gpu_state(state, profile, bus_id):
    gpus = state.setdefault('gpus', {})
    if bus_id not in gpus:
        gpus[bus_id] = {
            'persistence': False,
            'power_limit_w': float(profile['power']['default_w']),
            'locked_gpu_clocks': None,
            'locked_mem_clocks': None,
            'applications_clocks': None,
        }
    return gpus[bus_id]


# ---------------------------------------------------------------- kernel side

MODULE_DIRS = ('updates/dkms', 'extra', 'kernel/drivers/video', 'updates')


def find_module(kernel):
    """Return (path, info) of nvidia.ko for a kernel, info = {'version', 'flavour'} (None if absent)."""
    for sub in MODULE_DIRS:
        for name in ('nvidia.ko', 'nvidia.ko.xz', 'nvidia.ko.zst'):
            rel = os.path.join('lib/modules', kernel, sub, name)
            text = read_text(rel)
            if text is None:
                continue
            info = {}
            for tok in text.split():
                if '=' in tok:
                    k, v = tok.split('=', 1)
                    info[k] = v
            if 'version' in info:
                return path(rel), info
    return None, None


MODPROBE_DIRS = ('etc/modprobe.d', 'usr/lib/modprobe.d', 'lib/modprobe.d', 'run/modprobe.d')


def nouveau_blacklist_files():
    found = []
    for d in MODPROBE_DIRS:
        full = path(d)
        if not os.path.isdir(full):
            continue
        for name in sorted(os.listdir(full)):
            if not name.endswith('.conf'):
                continue
            text = read_text(os.path.join(d, name), '') or ''
            for line in text.splitlines():
                if line.split('#', 1)[0].split() == ['blacklist', 'nouveau']:
                    found.append('/' + os.path.join(d, name))
                    break
    return found


def initramfs_rel(kernel):
    """Initramfs image of a kernel: EL name if it exists or if the root is EL-like, else Debian's."""
    el = os.path.join('boot', 'initramfs-{0}.img'.format(kernel))
    deb = os.path.join('boot', 'initrd.img-{0}'.format(kernel))
    if os.path.exists(path(el)):
        return el
    if os.path.exists(path(deb)):
        return deb
    return None


def nouveau_loads_at_boot(kernel):
    """nouveau grabs the GPUs at boot unless blacklisted in the root AND in the initramfs.

    The testbed's dracut / update-initramfs write the image as a text manifest that copies the
    modprobe.d files, so "blacklisted in the initramfs" means the image was rebuilt after the
    blacklist was written.  No image at all: only the root's files count.
    """
    if not nouveau_blacklist_files():
        return True, 'nouveau is not blacklisted'
    rel = initramfs_rel(kernel)
    if rel is None:
        return False, None
    text = read_text(rel, '') or ''
    for line in text.splitlines():
        if line.split('#', 1)[0].split() == ['blacklist', 'nouveau']:
            return False, None
    return True, 'the initramfs {0} still loads nouveau (rebuild it)'.format('/' + rel)


def kernel_log_path():
    return path(os.path.join(RUN_DIR, 'kernel.log'))


def _stamp():
    up = 0.0
    try:
        with open('/proc/uptime') as f:
            up = float(f.read().split()[0])
    except (IOError, OSError, ValueError, IndexError):
        pass
    return '[{0:12.6f}]'.format(up)


def append_kernel_log(lines):
    rel = os.path.join(RUN_DIR, 'kernel.log')
    old = read_text(rel, '') or ''
    write_text(rel, old + ''.join('{0} {1}\n'.format(_stamp(), line) for line in lines))


def xid_lines(profile):
    """Kernel log lines for the Xid events named in the xid fault file."""
    out = []
    gpus = present_gpus(profile) or profile['gpus']
    for line in fault_lines(FAULT_XID):
        parts = line.split()
        xid = parts[0]
        gpu = _match_gpu(profile['gpus'], parts[1]) if len(parts) > 1 else gpus[0]
        if gpu is None:
            gpu = gpus[0]
        bus = sysfs_bus_id(gpu['pci_bus_id'])[:-2]
        out.append("NVRM: Xid (PCI:{0}): {1}, pid='<unknown>', name=<unknown>, {2}".format(
            bus, xid, XID_TEXT.get(xid, 'Unknown Error')))
    return out


def proc_driver_dir():
    return os.environ.get('GPU_DOUBLE_PROC_DRIVER', path('proc/driver'))


def nvrm_version_line(version, flavour, date='Thu Sep 18 21:36:58 UTC 2025'):
    if flavour == 'open':
        return ('NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {0}  Release Build  '
                '(dvs-builder@U16-I3-B03-4-3)  {1}'.format(version, date))
    return 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  {0}  {1}'.format(version, date)


def sys_module_dir():
    return os.path.join(os.environ.get('GPU_DOUBLE_ROOT', '/'), 'sys/module')


def write_sys_module(state):
    """Mirror which simulated modules are loaded into /sys/module (a tmpfs the testbed mounts there at boot).

    The host kernel's own /sys/module says nothing about the simulated nouveau and nvidia modules; the facts
    modules read /sys/module/nouveau and /sys/module/nvidia/version as on a real node.
    """
    base = sys_module_dir()
    if not os.path.isdir(base) or not os.access(base, os.W_OK):
        return
    drv = state.get('driver') or {}
    wanted = {}
    if state.get('nouveau_loaded'):
        wanted['nouveau'] = {'initstate': 'live\n'}
    if drv.get('loaded') and not fault_active(FAULT_DRIVER_UNLOADED):
        wanted['nvidia'] = {'initstate': 'live\n', 'version': drv['version'] + '\n'}
    try:
        for name in ('nouveau', 'nvidia'):
            path = os.path.join(base, name)
            if name not in wanted:
                if os.path.isdir(path):
                    for entry in os.listdir(path):
                        os.remove(os.path.join(path, entry))
                    os.rmdir(path)
                continue
            if not os.path.isdir(path):
                os.makedirs(path)
            for entry, text in wanted[name].items():
                with open(os.path.join(path, entry), 'w') as handle:
                    handle.write(text)
    except (IOError, OSError):
        pass


def write_proc_driver(state):
    """Mirror the driver state into /proc/driver/nvidia (a host folder bound there by the testbed)."""
    base = os.path.join(proc_driver_dir(), 'nvidia')
    drv = state.get('driver') or {}
    try:
        if not drv.get('loaded') or fault_active(FAULT_DRIVER_UNLOADED):
            if os.path.isdir(base):
                for dirpath, dirnames, filenames in os.walk(base, topdown=False):
                    for name in filenames:
                        os.remove(os.path.join(dirpath, name))
                    for name in dirnames:
                        os.rmdir(os.path.join(dirpath, name))
                os.rmdir(base)
            return
        if not os.path.isdir(base):
            os.makedirs(base)
        with open(os.path.join(base, 'version'), 'w') as f:
            f.write(nvrm_version_line(drv['version'], drv['flavour']) + '\n')
            f.write('GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n')
        gpus_dir = os.path.join(base, 'gpus')
        if not os.path.isdir(gpus_dir):
            os.makedirs(gpus_dir)
        profile = load_profile()
        wanted = set(sysfs_bus_id(g['pci_bus_id']) for g in present_gpus(profile)) \
            if drv.get('gpus_initialized') else set()
        for name in os.listdir(gpus_dir):
            if name not in wanted:
                info = os.path.join(gpus_dir, name, 'information')
                if os.path.exists(info):
                    os.remove(info)
                os.rmdir(os.path.join(gpus_dir, name))
        for gpu in present_gpus(profile):
            name = sysfs_bus_id(gpu['pci_bus_id'])
            if name not in wanted:
                continue
            d = os.path.join(gpus_dir, name)
            if not os.path.isdir(d):
                os.makedirs(d)
            with open(os.path.join(d, 'information'), 'w') as f:
                f.write('Model: \t\t {0}\nIRQ:   \t\t 0\nGPU UUID: \t {1}\nBus Location: \t {2}\n'.format(
                    profile['product_name'], gpu['uuid'], name))
    except (IOError, OSError):
        # no bind over /proc/driver (plain nspawn keeps it read-only): the state file still counts
        pass


def try_load_driver(profile, state, at_boot):
    """Decide whether the simulated nvidia module is loaded; update state['driver'].

    Rules (documented in README.md):
    1. nvidia.ko for ``uname -r`` must exist (dkms built it, i.e. headers for that kernel were there);
    2. nouveau must not own the GPUs: at boot it does unless blacklisted in the root and in the
       initramfs; after boot, nouveau stays loaded until the next boot;
    3. the proprietary flavour loads, but on Blackwell and newer it initializes no GPU;
    4. the fault ``driver-unloaded`` keeps it unloaded.
    """
    kernel = uname_r()
    drv = state.setdefault('driver', {})
    if at_boot:
        nouveau, why = nouveau_loads_at_boot(kernel)
        state['nouveau_loaded'] = nouveau
        state['nouveau_reason'] = why
        state['boot_kernel'] = kernel
        drv.clear()
        drv['loaded'] = False
    if drv.get('loaded'):
        return drv
    if fault_active(FAULT_DRIVER_UNLOADED):
        drv.update({'loaded': False, 'reason': 'fault driver-unloaded'})
        return drv
    modpath, info = find_module(kernel)
    if modpath is None:
        reason = 'modprobe: FATAL: Module nvidia not found in directory /lib/modules/{0}'.format(kernel)
        if drv.get('reason') != reason:
            append_kernel_log([reason])
        drv.update({'loaded': False, 'reason': reason})
        return drv
    if state.get('nouveau_loaded'):
        reason = 'nouveau owns the GPUs ({0})'.format(state.get('nouveau_reason'))
        if drv.get('reason') != reason:
            append_kernel_log([
                'NVRM: The NVIDIA probe routine was not called for {0} device(s).'.format(
                    len(present_gpus(profile))),
                'NVRM: This can occur when a driver such as: ',
                'NVRM: nouveau, rivafb, nvidiafb or rivatv ',
                'NVRM: was loaded and obtained ownership of the NVIDIA device(s).',
                'NVRM: No NVIDIA devices probed.',
            ])
        drv.update({'loaded': False, 'reason': reason})
        return drv
    flavour = info.get('flavour', 'open')
    initialized = not (flavour != 'open' and profile.get('architecture') in OPEN_ONLY_ARCHITECTURES)
    drv.update({'loaded': True, 'version': info['version'], 'flavour': flavour,
                'module': modpath, 'gpus_initialized': initialized, 'reason': None,
                'loaded_at': time.time()})
    lines = [nvrm_version_line(info['version'], flavour).replace('NVRM version: ', 'NVRM: loading ')]
    if not initialized:
        for gpu in present_gpus(profile):
            lines.append('NVRM: The NVIDIA GPU {0} (PCI ID: 10de:{1})'.format(
                sysfs_bus_id(gpu['pci_bus_id']), profile['pci_device_id'][2:]))
            lines.append('NVRM: installed in this system requires use of the NVIDIA open kernel modules.')
    append_kernel_log(lines)
    return drv


def ensure_state(profile, at_boot=False):
    """Load (or create at first use after boot) the state, attempt a driver load, save it."""
    state = None if at_boot else load_state()
    fresh = state is None
    if fresh:
        state = {'gpus': {}, 'boot_kernel': uname_r()}
    before = json.dumps(state, sort_keys=True)
    try_load_driver(profile, state, at_boot=fresh)
    if fault_active(FAULT_DRIVER_UNLOADED) and state['driver'].get('loaded'):
        state['driver'] = {'loaded': False, 'reason': 'fault driver-unloaded'}
        state['gpus'] = {}
    if fresh or json.dumps(state, sort_keys=True) != before:
        save_state(state)
        write_proc_driver(state)
        write_sys_module(state)
    return state


def render_kernel_log(profile):
    base = read_text(os.path.join(RUN_DIR, 'kernel.log'), '') or ''
    return base + ''.join('[  600.000000] {0}\n'.format(line) for line in xid_lines(profile))


# ---------------------------------------------------------------- PCI view

def write_pci_tree(profile, out_dir):
    """Write a sysfs-like tree (one folder per device) for the present GPUs and NVSwitches."""
    wanted = {}
    for gpu in present_gpus(profile):
        wanted[sysfs_bus_id(gpu['pci_bus_id'])] = {
            'vendor': '0x10de', 'device': profile['pci_device_id'], 'class': '0x030200',
            'subsystem_vendor': '0x' + profile['pci_sub_system_id'][-4:].lower(),
            'subsystem_device': '0x' + profile['pci_sub_system_id'][2:6].lower(),
        }
    for sw in profile.get('nvswitches', []):
        wanted[sw['bus_id']] = {
            'vendor': '0x10de', 'device': sw['device_id'], 'class': sw.get('class', '0x068000'),
            'subsystem_vendor': '0x10de', 'subsystem_device': sw.get('subsystem_device', '0x0000'),
        }
    if not os.path.isdir(out_dir):
        os.makedirs(out_dir)
    for name in os.listdir(out_dir):
        full = os.path.join(out_dir, name)
        if name not in wanted and os.path.isdir(full) and not os.path.islink(full) \
                and os.path.exists(os.path.join(full, 'gpu-double')):
            for f in os.listdir(full):
                os.remove(os.path.join(full, f))
            os.rmdir(full)
    for name, files in sorted(wanted.items()):
        d = os.path.join(out_dir, name)
        if not os.path.isdir(d):
            os.makedirs(d)
        files = dict(files)
        files['gpu-double'] = 'simulated device\n'
        for fname, value in files.items():
            with open(os.path.join(d, fname), 'w') as f:
                f.write(value if value.endswith('\n') else value + '\n')
    return sorted(wanted)
