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
import signal
import struct
import time

PROFILE = 'etc/testbed/hardware.json'
RUN_DIR = 'run/gpu-double'
PERSISTENCED_MARKER = os.path.join(RUN_DIR, 'persistenced.running')   # the daemon's PID while it runs
FAULT_DIR = 'var/lib/testbed/faults'
LIB_DIR = 'usr/lib/gpu-double'

# Fault flag files (names are the contract with tests/testbed/testbed.py `fault`/`heal`).
# GPU lost ("fell off the bus"): still on PCI, NVML cannot reach it. Content: lines "<index|bus id|uuid> [lost]";
# default: the last GPU.
FAULT_GPU_MISSING = 'gpu-missing'
# GPU gone from the PCI bus too (the others renumber); same content.
FAULT_GPU_REMOVED = 'gpu-removed'
# A clock lock reports success but the GPU runs lower (power/thermal); content: graphics MHz cap (default 85 % of the
# maximum).
FAULT_CLOCKS_CAPPED = 'clocks-capped'
# Out-of-band power cap (BMC): enforced limit below the requested one; content: watts (default 70 % of the default).
FAULT_POWER_CAPPED = 'power-capped'
# UEFI Secure Boot on, no MOK enrolled: unsigned/unenrolled modules are rejected ("Key was rejected by service").
FAULT_SECURE_BOOT = 'secure-boot'
FAULT_SMI_HANG = 'nvidia-smi-hang'            # nvidia-smi sleeps forever
FAULT_DRIVER_UNLOADED = 'driver-unloaded'     # driver answers as not loaded; /proc/driver/nvidia gone
FAULT_XID = 'xid'                             # lines "<xid> [<index|bus id>]"; default GPU 0
FAULT_RETIRED_PAGES = 'retired-pages-pending'  # optional content: indexes/bus ids, one a line; default all
FAULT_REMAPPED_ROWS = 'remapped-rows-pending'  # same
# NVLink fabric not registered (GB200/GB300 trays before the switch trays register them): fabric state In Progress;
# content: GPU ids, one a line (default: the last GPU).
FAULT_FABRIC_IN_PROGRESS = 'fabric-in-progress'
# NVLinks down between two GPUs (topo -m); content: lines "<gpu> <gpu> [links left]" (default "0 1 0").
FAULT_NVLINK_DOWN = 'nvlink-down'
# The GPUDirect RDMA path (tests/testbed/REALITY.md, "PCIe switches, ACS, nvidia_peermem"):
# ACS on (the BIOS default of many boards) at the switch downstream ports above GPUs/NICs; content: GPU indexes or
# bus ids of the devices below the ports, one a line (default GPU 0). Set again at every boot, as firmware does.
FAULT_ACS_ON = 'acs-on'
# nvidia_peermem unloaded (modprobe -r, or never loaded) until the next boot or modprobe.
FAULT_PEERMEM_UNLOADED = 'peermem-unloaded'
# The distribution's inbox RDMA stack: no ib_register_peer_memory_client, so modprobe nvidia_peermem fails with
# "Unknown symbol in module" and the kernel log says "nvidia_peermem: Unknown symbol ib_register_peer_memory_client".
FAULT_NO_PEER_API = 'rdma-no-peer-api'
# nvidia_peermem built before MLNX_OFED/DOCA-OFED was installed (the driver's DKMS build found no peer-memory
# symbols): modinfo -F depends nvidia_peermem is empty and modprobe fails with "Invalid argument" (its init returns
# -EINVAL), although /proc/kallsyms has the peer-memory API.
FAULT_PEERMEM_NO_OFED = 'peermem-no-ofed'
# The node is a virtual machine: systemd-detect-virt --vm prints the content (default kvm) and exits 0.
FAULT_VIRTUAL_MACHINE = 'virtual-machine'
FAULT_NAMES = (FAULT_GPU_MISSING, FAULT_GPU_REMOVED, FAULT_SMI_HANG, FAULT_DRIVER_UNLOADED, FAULT_XID,
               FAULT_RETIRED_PAGES, FAULT_REMAPPED_ROWS, FAULT_CLOCKS_CAPPED, FAULT_POWER_CAPPED, FAULT_SECURE_BOOT)
FAULT_NAMES += (FAULT_FABRIC_IN_PROGRESS, FAULT_NVLINK_DOWN)
# DCGM's software test fails on the GPUs named (lines "<index|bus id>"; default the last GPU): lib/dcgmi_double.py.
FAULT_DCGM_DIAG_FAIL = 'dcgm-diag-fail'
FAULT_NAMES += (FAULT_DCGM_DIAG_FAIL,)
FAULT_NAMES += (FAULT_ACS_ON, FAULT_PEERMEM_UNLOADED, FAULT_NO_PEER_API, FAULT_PEERMEM_NO_OFED,
                FAULT_VIRTUAL_MACHINE)
# Issue 28, fitness (tests/testbed/gpu_double/REALITY.md, "Fitness faults"). Each file: lines naming GPUs (index, bus id,
# UUID or `last`), default the last GPU, with the words given.
# A hardware slowdown: HW Slowdown and (word `power-brake`, the default, or `thermal`) HW Power Brake / HW Thermal
# Slowdown Active, graphics and SM clocks at a quarter of the maximum (the V100 capture: 382 of 1530 MHz).
FAULT_HW_SLOWDOWN = 'hw-slowdown'
# The PCIe link trained narrower or slower than it can: words `x<lanes>` (default x8) and `gen<n>` (default: as is).
FAULT_PCIE_DOWNTRAINED = 'pcie-downtrained'
# NVLinks that did not come up: words are link numbers (`3,7` or `3 7`, default the last link) or `all`.
FAULT_NVLINK_INACTIVE = 'nvlink-inactive'
# A row remap waits for a GPU reset: remapped_row_pending Yes, one more uncorrectable row, Xid 63 in the kernel log.
FAULT_ROWS_PENDING = 'rows-pending'
# MIG mode on (word `pending`: on after the next reset, current still Disabled).
FAULT_MIG_ENABLED = 'mig-enabled'
# all_reduce_perf runs slower: the first number is the factor applied to the bus bandwidth (default 0.5).
FAULT_ALLREDUCE_SLOW = 'allreduce-slow'
FAULT_NAMES += (FAULT_HW_SLOWDOWN, FAULT_PCIE_DOWNTRAINED, FAULT_NVLINK_INACTIVE, FAULT_ROWS_PENDING,
                FAULT_MIG_ENABLED, FAULT_ALLREDUCE_SLOW)
EFI_GLOBAL_GUID = '8be4df61-93ca-11d2-aa0d-00e098032b8c'

CUDA_BY_BRANCH = {'570': '12.8', '575': '12.9', '580': '13.0', '590': '13.1', '595': '13.2'}
# Architectures that only work with the open kernel modules.
OPEN_ONLY_ARCHITECTURES = ('Blackwell', 'Rubin')

XID_TEXT = {
    '13': 'Graphics Engine Exception',
    '31': 'MMU Fault',
    '43': 'Reset Channel Verif Error',
    '48': 'An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer',
    # stas00/ml-engineering compute/accelerator/nvidia/debug.md quotes the driver's line for Xid 63
    '63': 'Row Remapper: New row marked for remapping, reset gpu to activate.',
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


def _fault_gpus(gpus, name):
    """[(gpu, words after the id)] named by a GPU fault file (default: the last GPU)."""
    lines = fault_lines(name)
    if not lines:
        return [(gpus[-1], [])] if gpus else []
    out = []
    for line in lines:
        parts = line.split()
        gpu = gpus[-1] if parts[0] == 'last' and gpus else _match_gpu(gpus, parts[0])
        if gpu is not None:
            out.append((gpu, parts[1:]))
    return out


def present_gpus(profile):
    """GPUs on the PCI bus, with the index nvidia-smi gives them (the gpu-removed fault takes one off the bus;
    the others renumber as after a real hot-remove).  A lost GPU (gpu-missing) is still present here."""
    gpus = list(profile['gpus'])
    if fault_active(FAULT_GPU_REMOVED) and gpus:
        gone_ids = set(g['pci_bus_id'] for g, _lost in _fault_gpus(gpus, FAULT_GPU_REMOVED))
        gpus = [dict(g, index=i) for i, g in enumerate(g for g in gpus if g['pci_bus_id'] not in gone_ids)]
    return gpus


def lost_gpus(profile):
    """{bus id: reason} of GPUs that fell off the bus (gpu-missing): NVML cannot get their handle.
    Reason 'lost' gives "GPU is lost. Reboot the system to recover this GPU", anything else "Unknown Error"."""
    if not fault_active(FAULT_GPU_MISSING):
        return {}
    out = {}
    for gpu, words in _fault_gpus(present_gpus(profile), FAULT_GPU_MISSING):
        out[gpu['pci_bus_id']] = 'GPU is lost. Reboot the system to recover this GPU' if 'lost' in words \
            else 'Unknown Error'
    return out


def fault_number(name, default):
    """First number in a fault file (default when empty or not a number)."""
    for line in fault_lines(name):
        try:
            return float(line.split()[0])
        except (ValueError, IndexError):
            break
    return default


def clock_cap_mhz(profile):
    """Graphics clock ceiling while the clocks-capped fault is active (None otherwise)."""
    if not fault_active(FAULT_CLOCKS_CAPPED):
        return None
    return int(fault_number(FAULT_CLOCKS_CAPPED, round(profile['max_clocks']['graphics_mhz'] * 0.85)))


def power_cap_w(profile):
    """Out-of-band power cap while the power-capped fault is active (None otherwise)."""
    if not fault_active(FAULT_POWER_CAPPED):
        return None
    pw = profile['power']
    return max(float(pw['min_w']), fault_number(FAULT_POWER_CAPPED, round(pw['default_w'] * 0.7)))


def fault_gpus(profile, name):
    """{bus id: [words]} of the GPUs a fitness fault names (default the last GPU); {} when it is not active."""
    if not fault_active(name):
        return {}
    return dict((gpu['pci_bus_id'], words) for gpu, words in _fault_gpus(present_gpus(profile), name))


def hw_slowdown(profile):
    """{bus id: 'power-brake' | 'thermal'} of the GPUs held down by the hw-slowdown fault."""
    return dict((bus, 'thermal' if 'thermal' in words else 'power-brake')
                for bus, words in fault_gpus(profile, FAULT_HW_SLOWDOWN).items())


def pcie_downtrained(profile):
    """{bus id: {'width': lanes, 'gen': generation or None}} of the GPUs whose link trained lower."""
    out = {}
    for bus, words in fault_gpus(profile, FAULT_PCIE_DOWNTRAINED).items():
        link = {'width': 8, 'gen': None}
        for word in words:
            if re.match(r'^x\d+$', word):
                link['width'] = int(word[1:])
            elif re.match(r'^gen\d+$', word):
                link['gen'] = int(word[3:])
        out[bus] = link
    return out


def nvlink_inactive(profile):
    """{bus id: set of inactive link numbers} (every link for `all`); links the board does not have are ignored."""
    total = int(profile.get('nvlinks') or 0)
    out = {}
    for bus, words in fault_gpus(profile, FAULT_NVLINK_INACTIVE).items():
        if 'all' in words:
            out[bus] = set(range(total))
            continue
        links = set()
        for word in words:
            for part in word.split(','):
                if part.isdigit() and int(part) < total:
                    links.add(int(part))
        out[bus] = links or ({total - 1} if total else set())
    return out


def rows_pending(profile):
    """Bus ids of the GPUs with a row remap waiting for a reset (rows-pending fault)."""
    return set(fault_gpus(profile, FAULT_ROWS_PENDING))


def mig_enabled(profile):
    """{bus id: (current, pending)} MIG modes the mig-enabled fault sets."""
    return dict((bus, ('Disabled', 'Enabled') if 'pending' in words else ('Enabled', 'Enabled'))
                for bus, words in fault_gpus(profile, FAULT_MIG_ENABLED).items())


def allreduce_factor():
    """The factor the allreduce-slow fault applies to all_reduce_perf's bus bandwidth (None when inactive)."""
    if not fault_active(FAULT_ALLREDUCE_SLOW):
        return None
    return min(1.0, max(0.01, fault_number(FAULT_ALLREDUCE_SLOW, 0.5)))


def fault_age_us(name):
    """Microseconds since a fault file was written (0 when it is not there): the counters a fault makes grow."""
    try:
        return max(0, int((time.time() - os.path.getmtime(path(os.path.join(FAULT_DIR, name)))) * 1e6))
    except OSError:
        return 0


def secure_boot_on():
    return fault_active(FAULT_SECURE_BOOT)


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


VOLATILE = ('power_limit_w', 'locked_gpu_clocks', 'locked_mem_clocks', 'applications_clocks')


def reset_volatile(state, profile, only_without_persistence=True):
    """The driver deinitializes a GPU when its last client goes and persistence mode is off: power limit, locked
    and applications clocks return to their defaults (NVML: these settings are not persistent)."""
    changed = False
    for st in state.get('gpus', {}).values():
        if only_without_persistence and st.get('persistence'):
            continue
        default = {'power_limit_w': float(profile['power']['default_w'])}
        for key in VOLATILE:
            if st.get(key) != default.get(key):
                st[key] = default.get(key)
                changed = True
    return changed


# ---------------------------------------------------------------- kernel side

MODULE_DIRS = ('updates/dkms', 'extra', 'kernel/drivers/video', 'updates')


def module_dirs(kernel):
    """MODULE_DIRS, then Ubuntu's prebuilt ones: linux-modules-nvidia-<B>-server[-open]-<kernel> puts nvidia.ko in
    kernel/nvidia-<B>srv[-open]/ (tests/testbed/REALITY.md, "Ubuntu's signed driver")."""
    base = path(os.path.join('lib/modules', kernel, 'kernel'))
    extra = sorted('kernel/' + n for n in os.listdir(base) if n.startswith('nvidia-')) if os.path.isdir(base) else []
    return list(MODULE_DIRS) + extra


def find_module(kernel):
    """Return (path, info) of nvidia.ko for a kernel, info = {'version', 'flavour'[, 'signer']} (None if
    absent)."""
    for sub in module_dirs(kernel):
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


# ---------------------------------------------------------------- nvidia_peermem and the RDMA stack's symbols
PEERMEM = 'nvidia_peermem'
PEER_MEMORY_SYMBOLS = ('ib_register_peer_memory_client', 'ib_unregister_peer_memory_client')
# /proc/kallsyms as the node shows it (the early-boot hook binds this file over /proc/kallsyms): the RDMA stack's
# ib_core symbols, with the peer-memory API of MLNX_OFED/DOCA-OFED unless the rdma-no-peer-api fault makes it the
# inbox stack. Addresses read 0 as for a user without CAP_SYSLOG (kptr_restrict); only the names matter.
KALLSYMS = os.path.join(RUN_DIR, 'kallsyms')
PEERMEM_UNKNOWN_SYMBOL = ("modprobe: ERROR: could not insert 'nvidia_peermem': Unknown symbol in module, or unknown "
                          "parameter (see dmesg)")
# kmod's modprobe for any other init_module error: strerror of it (-EINVAL from nv_mem_client_init).
PEERMEM_EINVAL = "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument"
# The RDMA core's DMA-BUF registration, in ib_core since Linux 5.12 (inbox and OFED alike).
DMABUF_SYMBOLS = ('ib_umem_dmabuf_get',)


def peer_api():
    return not fault_active(FAULT_NO_PEER_API)


def peermem_with_ofed():
    """nvidia_peermem was built against the peer-memory API (not the peermem-no-ofed fault)."""
    return not fault_active(FAULT_PEERMEM_NO_OFED)


def peermem_depends():
    """modinfo -F depends nvidia_peermem: ib_core and nvidia when built with OFED's peer-memory API, nothing when built
    without it (its code then calls neither module)."""
    return 'ib_core,nvidia' if peermem_with_ofed() else ''


def kernel_has_dmabuf(release=None):
    """Linux 5.12 or later (the RDMA core's DMA-BUF registration)."""
    try:
        major, minor = [int(x) for x in (release or uname_r()).split('-')[0].split('.')[:2]]
    except ValueError:
        return False
    return (major, minor) >= (5, 12)


def peermem_marker():
    return path(os.path.join(RUN_DIR, 'modules', PEERMEM))


def peermem_loaded():
    """nvidia_peermem counts as loaded: asked for (modprobe or modules-load.d at boot), the driver loaded, the peer
    API there, and no peermem-unloaded fault."""
    state = load_state() or {}
    return (os.path.exists(peermem_marker()) and bool((state.get('driver') or {}).get('loaded')) and peer_api()
            and peermem_with_ofed() and not fault_active(FAULT_PEERMEM_UNLOADED))


def kallsyms_text():
    lines = ['0000000000000000 T ib_register_client\t[ib_core]', '0000000000000000 T ib_umem_get\t[ib_core]']
    if kernel_has_dmabuf():
        lines += ['0000000000000000 T {0}\t[ib_core]'.format(name) for name in DMABUF_SYMBOLS]
    if peer_api():
        lines += ['0000000000000000 T {0}\t[ib_core]'.format(name) for name in PEER_MEMORY_SYMBOLS]
    return '\n'.join(lines) + '\n'


def write_rdma_views():
    """/sys/module/nvidia_peermem while it counts as loaded, and the kallsyms file (rewritten in place: it is the
    source of a bind mount)."""
    try:
        with open(path(KALLSYMS), 'w') as handle:
            handle.write(kallsyms_text())
    except (IOError, OSError):
        pass
    base = sys_module_dir()
    if not os.path.isdir(base) or not os.access(base, os.W_OK):
        return
    target = os.path.join(base, PEERMEM)
    try:
        if peermem_loaded():
            if not os.path.isdir(target):
                os.makedirs(target)
            with open(os.path.join(target, 'initstate'), 'w') as handle:
                handle.write('live\n')
        elif os.path.isdir(target):
            for entry in os.listdir(target):
                os.remove(os.path.join(target, entry))
            os.rmdir(target)
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


# /proc/devices as the node sees it (gpu_double/early/50-gpu-double-sysfs binds this file over it, after keeping the
# host's in PROC_DEVICES_HOST): the host's lines, and the driver's character devices while it is loaded.
PROC_DEVICES = os.path.join(RUN_DIR, 'devices')
PROC_DEVICES_HOST = os.path.join(RUN_DIR, 'devices.host')
NVIDIA_MAJOR = 195
# The character devices the driver registers with a dynamic major, in the order the double registers them (the
# order is a guess; nvidia and nvidiactl have the fixed major 195: NVIDIA's CUDA guide lists "195 nvidia",
# "195 nvidiactl", "234 nvidia-caps-imex-channels", "509 nvidia-nvswitch").
NVIDIA_DYNAMIC = ('nvidia-uvm', 'nvidia-nvlink', 'nvidia-caps', 'nvidia-caps-imex-channels')
# Linux fs/char_dev.c find_dynamic_major: chrdevs[] has 255 buckets; the first free one from 254 down to 234
# (CHRDEV_MAJOR_DYN_END), then the first free major from 511 (CHRDEV_MAJOR_DYN_EXT_START) down to 384.
CHRDEV_BUCKETS = 255


def _dynamic_major(taken):
    for major in range(CHRDEV_BUCKETS - 1, 233, -1):
        if not any(m % CHRDEV_BUCKETS == major for m in taken):
            return major
    for major in range(511, 383, -1):
        if major not in taken:
            return major
    raise DoubleError('no free character major left')


def proc_devices_text(host_text, loaded, nvswitch=False):
    """/proc/devices with the driver's character devices added when it is loaded (majors as Linux gives them)."""
    sections, order, current = {}, [], None
    for line in (host_text or '').splitlines():
        stripped = line.strip()
        if stripped.endswith(':'):
            current = stripped
            order.append(current)
            sections[current] = []
        elif stripped and current:
            parts = stripped.split(None, 1)
            if len(parts) == 2 and parts[0].isdigit():
                sections[current].append((int(parts[0]), parts[1]))
    char = 'Character devices:'
    if char not in sections:
        order.insert(0, char)
        sections[char] = []
    if loaded:
        entries = sections[char]
        entries += [(NVIDIA_MAJOR, 'nvidia'), (NVIDIA_MAJOR, 'nvidiactl')]
        for name in NVIDIA_DYNAMIC + (('nvidia-nvswitch',) if nvswitch else ()):
            entries.append((_dynamic_major(set(m for m, _n in entries)), name))
    out = []
    for name in order:
        if out:
            out.append('')
        out.append(name)
        out.extend('{0:3d} {1}'.format(major, dev) for major, dev in sorted(sections[name], key=lambda e: e[0]))
    return '\n'.join(out) + '\n'


def write_proc_devices(state):
    """Rewrite the bound /proc/devices in place (a missing host copy: nothing is bound, nothing to do)."""
    host = read_text(PROC_DEVICES_HOST)
    if host is None:
        return
    drv = state.get('driver') or {}
    loaded = bool(drv.get('loaded')) and not fault_active(FAULT_DRIVER_UNLOADED)
    try:
        with open(path(PROC_DEVICES), 'w') as handle:
            handle.write(proc_devices_text(host, loaded, nvswitch=nvswitch_count(load_profile()) > 0))
    except (IOError, OSError):
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
    if secure_boot_on() and info.get('signer') != 'canonical':
        # Secure Boot with kernel lockdown: the DKMS-built module is not signed by an enrolled key (Ubuntu's
        # prebuilt modules are signed by Canonical, whose key the shim trusts).
        reason = "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service"
        if drv.get('reason') != reason:
            append_kernel_log([
                'Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7',
                'nvidia: module verification failed: signature and/or required key missing - tainting kernel',
                'Loading of unsigned module is rejected',
            ])
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
    unloaded_now = fault_active(FAULT_DRIVER_UNLOADED) and state['driver'].get('loaded')
    if unloaded_now:
        state['driver'] = {'loaded': False, 'reason': 'fault driver-unloaded'}
        state['gpus'] = {}
    if fresh or json.dumps(state, sort_keys=True) != before:
        save_state(state)
        write_proc_driver(state)
        write_sys_module(state)
        write_proc_devices(state)
    if unloaded_now:
        stop_persistenced()
    return state


def persistenced_pid():
    """PID the simulated nvidia-persistenced wrote at start, or None."""
    pid = (read_text(PERSISTENCED_MARKER, '') or '').strip()
    return int(pid) if pid.isdigit() else None


def stop_persistenced(wait=5.0):
    """The nvidia module cannot be unloaded while nvidia-persistenced holds /dev/nvidia* ("Module nvidia is in use"):
    a node whose driver is gone has no persistence daemon either (tests/testbed/gpu_double/REALITY.md). The daemon's
    SIGTERM handler removes its marker; wait for that, so that it never saves a state older than ours."""
    marker = path(PERSISTENCED_MARKER)
    pid = persistenced_pid()
    if root() != '/' or pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.time() + wait
    while os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.05)


def lost_xid_lines(profile):
    """A GPU that fell off the bus (gpu-missing) leaves Xid 79 in the kernel log."""
    return ["NVRM: Xid (PCI:{0}): 79, pid='<unknown>', name=<unknown>, {1}".format(
        sysfs_bus_id(bus)[:-2], XID_TEXT['79']) for bus in sorted(lost_gpus(profile))]


def rows_pending_xid_lines(profile):
    """A pending row remap leaves Xid 63 in the kernel log (stas00/ml-engineering compute/accelerator/nvidia/debug.md
    quotes the line)."""
    return ["NVRM: Xid (PCI:{0}): 63, pid='<unknown>', name=<unknown>, {1}".format(
        sysfs_bus_id(bus)[:-2], XID_TEXT['63']) for bus in sorted(rows_pending(profile))]


def render_kernel_log(profile):
    base = read_text(os.path.join(RUN_DIR, 'kernel.log'), '') or ''
    return base + ''.join('[  600.000000] {0}\n'.format(line)
                          for line in lost_xid_lines(profile) + xid_lines(profile) + rows_pending_xid_lines(profile))


# ---------------------------------------------------------------- PCI view

def build_vpd(product, fields, reserved=1):
    """Binary PCI VPD as the device returns it: large-resource ID string (0x82), VPD-R (0x90) with 2-byte keywords
    and an RV checksum (all bytes up to and including it sum to 0), end tag (0x78).  Layout: PCI Local Bus spec
    (VPD), Linux drivers/pci/vpd.c, pciutils ls-vpd.c."""
    ident = product.encode('ascii')
    body = bytearray()
    for key, value in fields:
        raw = value.encode('ascii')
        body += key.encode('ascii') + bytearray([len(raw)]) + raw
    rv_len = 1 + reserved
    data = bytearray([0x82]) + struct.pack('<H', len(ident)) + ident
    data += bytearray([0x90]) + struct.pack('<H', len(body) + 3 + rv_len) + body + b'RV' + bytearray([rv_len])
    data.append((-sum(data)) & 0xff)
    data += bytearray(reserved) + bytearray([0x78])
    return bytes(data)


def parse_vpd(data):
    """(product name, {keyword: value}) of a binary VPD (for tests and `gpu-double vpd`)."""
    data = bytearray(data)
    pos, name, fields = 0, None, {}
    while pos < len(data):
        tag = data[pos]
        if tag == 0x78:
            break
        if not tag & 0x80:
            pos += 1 + (tag & 0x07)
            continue
        size = struct.unpack('<H', bytes(data[pos + 1:pos + 3]))[0]
        chunk = data[pos + 3:pos + 3 + size]
        if tag == 0x82:
            name = bytes(chunk).decode('ascii')
        elif tag in (0x90, 0x91):
            k = 0
            while k + 3 <= len(chunk):
                key = bytes(chunk[k:k + 2]).decode('ascii')
                length = chunk[k + 2]
                fields[key] = bytes(chunk[k + 3:k + 3 + length])
                k += 3 + length
        pos += 3 + size
    return name, dict((k, v.decode('ascii', 'replace')) for k, v in fields.items())


def vpd_bytes(dev):
    """Binary VPD of a ConnectX device of the profile."""
    vpd = dev['vpd']
    return build_vpd(vpd['product'], [tuple(f) for f in vpd['fields']], vpd.get('reserved', 1))


def nvswitch_fabric(profile):
    """True when the board has NVSwitches: PCI NVSwitch functions (Hopper) or SW_MNG bridges (NVLink 5)."""
    return bool(profile.get('nvswitches')) or any(d.get('sw_mng') for d in profile.get('connectx', []))


def nvswitch_count(profile):
    return len(profile.get('nvswitches', [])) or len([d for d in profile.get('connectx', []) if d.get('sw_mng')])


def _clear_dir(full):
    for dirpath, dirnames, filenames in os.walk(full, topdown=False):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            os.remove(os.path.join(dirpath, name))
        for name in dirnames:
            if not os.path.islink(os.path.join(dirpath, name)):
                os.rmdir(os.path.join(dirpath, name))
    os.rmdir(full)


# ---------------------------------------------------------------- PCIe switches and config space
# Every GPU, NIC and NVSwitch sits below a switch downstream port, as on HGX boards (tests/testbed/REALITY.md; layout,
# ids and ACS bits from the HGX H100 `lspci -vvv` capture in tests/fixtures/lspci): endpoints whose bus numbers are
# close share one switch; each switch hangs off its own root port. Each device gets a 4 KiB `config` file that the
# real lspci and setpci read and write (the Type 0/1 header, the PCI Express capability and, on bridges, the ACS
# extended capability), plus the `irq` and `resource` files lspci opens.

ROOT_PORT = {'vendor': 0x8086, 'device': 0x352a, 'acs_cap': 0x1f, 'acs_ctl': 0x00}       # Intel 352a root port
GPU_SWITCH = {'vendor': 0x1000, 'device': 0xc030, 'acs_cap': 0x5f, 'acs_ctl': 0x00}      # Broadcom PEX890xx
NVSWITCH_SWITCH = {'vendor': 0x11f8, 'device': 0x4128, 'acs_cap': 0x7f, 'acs_ctl': 0x1d}  # PMC-Sierra 4128
# ACSCtl bits as lspci names them (PCIe base spec, ACS Control register): SrcValid 0, TransBlk 1, ReqRedir 2,
# CmpltRedir 3, UpstreamFwd 4, EgressCtrl 5, DirectTrans 6. ACS on: as the capture's PMC-Sierra ports.
ACS_ON = 0x1d
PCIE_TYPES = {'endpoint': 0, 'root': 4, 'upstream': 5, 'downstream': 6}
_GAP = 8


def _sysfs(bus_id):
    """A bus id in the sysfs form whether nvidia-smi's (8-digit domain) or sysfs' spelling is given."""
    text = bus_id.strip().lower()
    return text[4:] if len(text.split(':')[0]) == 8 else text


def _bus_of(bus_id):
    return int(_sysfs(bus_id)[5:7], 16)


def pci_switches(profile):
    """The bridges above the profile's PCI endpoints: {bus id: {kind, secondary, subordinate, ids, below}}."""
    endpoints = sorted(set([_sysfs(g['pci_bus_id']) for g in present_gpus(profile)]
                           + [_sysfs(sw['bus_id']) for sw in profile.get('nvswitches', [])]
                           + [_sysfs(dev['bus_id']) for dev in profile.get('connectx', [])]),
                       key=lambda b: (_bus_of(b), b))
    clusters = []
    for bus_id in endpoints:
        bus = _bus_of(bus_id)
        if clusters and bus - _bus_of(clusters[-1][-1]) < _GAP:
            clusters[-1].append(bus_id)
        else:
            clusters.append([bus_id])
    nvswitch_ids = set(sw['bus_id'] for sw in profile.get('nvswitches', []))
    bridges = {}
    for cluster in clusters:
        low, high = _bus_of(cluster[0]), _bus_of(cluster[-1])
        if low < 3:
            # No room for a switch above the first buses (the GB200 tray's ConnectX functions are on buses 01-04):
            # each bus hangs off a root port of bus 0 directly, as devices without a PCIe switch do.
            for n, bus in enumerate(sorted(set(_bus_of(b) for b in cluster))):
                bridges['0000:00:{0:02x}.0'.format(0x10 + n)] = {
                    'kind': 'root', 'secondary': bus, 'subordinate': bus, 'ids': ROOT_PORT,
                    'below': [b for b in cluster if _bus_of(b) == bus]}
            continue
        ids = NVSWITCH_SWITCH if all(b in nvswitch_ids for b in cluster) else GPU_SWITCH
        bridges['0000:{0:02x}:01.0'.format(low - 3)] = {
            'kind': 'root', 'secondary': low - 2, 'subordinate': high, 'ids': ROOT_PORT, 'below': list(cluster)}
        bridges['0000:{0:02x}:00.0'.format(low - 2)] = {
            'kind': 'upstream', 'secondary': low - 1, 'subordinate': high, 'ids': ids, 'below': list(cluster)}
        buses = sorted(set(_bus_of(b) for b in cluster))
        for n, bus in enumerate(buses):
            below = [b for b in cluster if _bus_of(b) == bus]
            bridges['0000:{0:02x}:{1:02x}.0'.format(low - 1, n + 1)] = {
                'kind': 'downstream', 'secondary': bus, 'subordinate': bus, 'ids': ids, 'below': below}
    return bridges


def acs_on_ports(profile, bridges):
    """The downstream ports the acs-on fault turns ACS on at (those above the devices its lines name)."""
    if not fault_active(FAULT_ACS_ON):
        return set()
    gpus = present_gpus(profile)
    wanted = set()
    for line in fault_lines(FAULT_ACS_ON) or ['0']:
        gpu = _match_gpu(gpus, line)
        if gpu:
            wanted.add(_sysfs(gpu['pci_bus_id']))
        else:
            try:
                wanted.add(_sysfs(line))
            except (ValueError, IndexError):
                continue
    return set(name for name, b in bridges.items() if b['kind'] == 'downstream' and wanted & set(b['below']))


def config_space(vendor, device, pci_class, kind, subsystem=(0, 0), bridge=None, acs=None, revision=0):
    """4 KiB of PCI configuration space: the header (Type 0, or Type 1 with the bus numbers), the PCI Express
    capability at 0x40 (device/port type, slot implemented on root and downstream ports) and, with ``acs``
    ``(cap, ctl)``, the ACS extended capability (ID 0x000d) at 0x100."""
    cfg = bytearray(4096)
    struct.pack_into('<HHHHI', cfg, 0, vendor, device, 0x0006, 0x0010, (pci_class << 8) | revision)
    cfg[0x0e] = 0x01 if bridge else 0x00
    cfg[0x34] = 0x40
    if bridge:
        cfg[0x18], cfg[0x19], cfg[0x1a] = bridge
    else:
        struct.pack_into('<HH', cfg, 0x2c, subsystem[0], subsystem[1])
    slot = 0x0100 if kind in ('root', 'downstream') else 0
    struct.pack_into('<BBH', cfg, 0x40, 0x10, 0x00, 0x0002 | (PCIE_TYPES[kind] << 4) | slot)
    if acs is not None:
        struct.pack_into('<IHH', cfg, 0x100, 0x000d | (1 << 16), acs[0], acs[1])
    return bytes(cfg)


def _endpoint_config(files):
    return config_space(int(files['vendor'], 16), int(files['device'], 16), int(files['class'], 16), 'endpoint',
                        (int(files['subsystem_vendor'], 16), int(files['subsystem_device'], 16)),
                        revision=0xa1 if files['vendor'] == '0x10de' else 0)


def bridge_files(profile):
    """The sysfs files of the bridges pci_switches() places, with ACS as the profile and the acs-on fault say."""
    bridges = pci_switches(profile)
    acs_on = acs_on_ports(profile, bridges)
    out = {}
    for name, b in bridges.items():
        ids = b['ids']
        ctl = ACS_ON if name in acs_on else ids['acs_ctl']
        acs = None if b['kind'] == 'upstream' else (ids['acs_cap'], ctl)
        primary = int(name[5:7], 16)
        out[name] = {'vendor': '0x{0:04x}'.format(ids['vendor']), 'device': '0x{0:04x}'.format(ids['device']),
                     'class': '0x060400', 'subsystem_vendor': '0x0000', 'subsystem_device': '0x0000',
                     'config': config_space(ids['vendor'], ids['device'], 0x060400, b['kind'],
                                            bridge=(primary, b['secondary'], b['subordinate']), acs=acs)}
    return out


def write_pci_tree(profile, out_dir):
    """Write a sysfs-like tree (one folder per device) for the GPUs on the bus, the NVSwitches (Hopper) and the
    ConnectX-7 functions (NICs and, on NVLink 5 boards, the SW_MNG bridges with their binary vpd)."""
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
    for dev in profile.get('connectx', []):
        wanted[dev['bus_id']] = {
            'vendor': '0x15b3', 'device': dev['device_id'], 'class': dev['class'],
            'subsystem_vendor': '0x15b3', 'subsystem_device': dev['subsystem_device'],
            'vpd': vpd_bytes(dev),
        }
    for files in wanted.values():
        files['config'] = _endpoint_config(files)
    wanted.update(bridge_files(profile))
    for files in wanted.values():
        files.update(irq='0', resource='')
    if not os.path.isdir(out_dir):
        os.makedirs(out_dir)
    for name in os.listdir(out_dir):
        full = os.path.join(out_dir, name)
        if name not in wanted and os.path.isdir(full) and not os.path.islink(full) \
                and os.path.exists(os.path.join(full, 'gpu-double')):
            _clear_dir(full)
    for name, files in sorted(wanted.items()):
        d = os.path.join(out_dir, name)
        if not os.path.isdir(d):
            os.makedirs(d)
        files = dict(files)
        files['gpu-double'] = 'simulated device\n'
        for fname, value in files.items():
            target = os.path.join(d, fname)
            if isinstance(value, bytes):
                with open(target, 'wb') as f:
                    f.write(value)
                # real sysfs vpd is readable by root only; config is world-readable (64 bytes for users), root writes
                os.chmod(target, 0o644 if fname == 'config' else 0o600)
                continue
            with open(target, 'w') as f:
                f.write(value if value.endswith('\n') or value == '' else value + '\n')
    return sorted(wanted)


def write_ib_tree(profile, ib_dir, pci_link_base='../../../bus/pci/devices'):
    """/sys/class/infiniband/mlx5_N (one per ConnectX function, in PCI order) with `device` -> the PCI device."""
    devs = sorted(profile.get('connectx', []), key=lambda d: d['bus_id'])
    if not os.path.isdir(ib_dir):
        os.makedirs(ib_dir)
    wanted = {}
    for n, dev in enumerate(devs):
        wanted['mlx5_{0}'.format(n)] = dev
    for name in os.listdir(ib_dir):
        full = os.path.join(ib_dir, name)
        if name not in wanted and os.path.isdir(full) and os.path.exists(os.path.join(full, 'gpu-double')):
            _clear_dir(full)
    for name, dev in sorted(wanted.items()):
        d = os.path.join(ib_dir, name)
        if not os.path.isdir(d):
            os.makedirs(d)
        link = os.path.join(d, 'device')
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join(pci_link_base, dev['bus_id']), link)
        for fname, value in (('gpu-double', 'simulated device'), ('hca_type', dev.get('hca_type', 'MT4129')),
                             ('fw_ver', dev.get('fw_ver', '28.42.1274')), ('node_guid', dev['node_guid'])):
            with open(os.path.join(d, fname), 'w') as f:
                f.write(value + '\n')
    return sorted(wanted)


def write_efivars(efivars_dir):
    """SecureBoot and SetupMode EFI variables (efivarfs format: 4-byte attributes, then the data)."""
    if not os.path.isdir(efivars_dir):
        os.makedirs(efivars_dir)
    attrs = struct.pack('<I', 0x06)  # BOOTSERVICE_ACCESS | RUNTIME_ACCESS
    for name, value in (('SecureBoot', 1 if secure_boot_on() else 0), ('SetupMode', 0)):
        with open(os.path.join(efivars_dir, '{0}-{1}'.format(name, EFI_GLOBAL_GUID)), 'wb') as f:
            f.write(attrs + bytearray([value]))


def read_efivar(name, efivars_dir=None):
    """Data bytes of an EFI variable (None when absent)."""
    base = efivars_dir or os.environ.get('GPU_DOUBLE_EFIVARS') or path('sys/firmware/efi/efivars')
    try:
        with open(os.path.join(base, '{0}-{1}'.format(name, EFI_GLOBAL_GUID)), 'rb') as f:
            return bytearray(f.read())[4:]
    except (IOError, OSError):
        return None
