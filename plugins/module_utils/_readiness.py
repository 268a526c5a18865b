# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# It may change or disappear in any release without notice; do not import it
# from other collections or from playbooks.
#
# Fleet readiness: pure functions, no Ansible import.
#
# * evaluate(facts, settings, probe=None) turns the facts gathered by
#   gpu_node_facts (namespaces nvidia, kernel_state, limits, shm, nics; see
#   docs/contracts.md) plus what readiness_check reads on the node (the NCCL
#   config file, NVIDIA Xid lines of the kernel log, systemd unit states) into a
#   list of checks {id, status, expected, observed, remedy}. The settings are the
#   roles' own variables, so "ready" means "what site.yml would leave".
# * find_lost_gpus(facts) lists GPUs the PCI bus shows but nvidia-smi does not.
# * build_report() / render_json() / render_junit() / render_html() /
#   render_matrix() turn the per-host results into the controller-side report.
#
# Python 3.6 compatible (EL8 platform-python).

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ipaddress
import json
import math
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _gpu_settings as gpu_settings


class ReadinessError(Exception):
    """A setting or a fact handed to the readiness check is malformed."""


# (bandit: 'pass' is a check status, not a password)
PASS = 'pass'  # nosec B105
WARN = 'warn'
FAIL = 'fail'
SKIP = 'skip'
STATUSES = (PASS, WARN, FAIL, SKIP)
UNREACHABLE = 'unreachable'

# Worst first: the status of a group of findings is the first one present.
_SEVERITY = (FAIL, WARN, PASS, SKIP)

CHECK_IDS = (
    'kernel.devel_matched',
    'driver.nouveau_blacklisted',
    'driver.loaded',
    'driver.open_modules',
    'driver.persistenced',
    'gpu.count',
    'gpu.power_limit',
    'gpu.clocks',
    'gpu.health',
    'memlock.users',
    'memlock.services',
    'shm.size',
    'nccl.config',
    'nic.offload',
    'fabric.manager',
)

_ROLE = 'role gpufleet.nodeprep.{0} (playbooks/{0}.yml)'
REMEDIES = {
    'kernel.devel_matched': _ROLE.format('kernel'),
    'driver.nouveau_blacklisted': _ROLE.format('nvidia_driver'),
    'driver.loaded': _ROLE.format('nvidia_driver'),
    'driver.open_modules': _ROLE.format('nvidia_driver'),
    'driver.persistenced': _ROLE.format('nvidia_driver'),
    'gpu.count': 'playbooks/recover_gpu.yml (GPU missing from nvidia-smi); a GPU missing from the PCI bus as well '
                 'needs a reboot and then hardware service',
    'gpu.power_limit': _ROLE.format('gpu_settings'),
    'gpu.clocks': _ROLE.format('gpu_settings'),
    'gpu.health': 'drain the node, then playbooks/recover_gpu.yml (reboot resets the GPU and applies pending '
                  'page retirement or row remapping); repeated faults: hardware service',
    'memlock.users': _ROLE.format('memlock'),
    'memlock.services': _ROLE.format('memlock'),
    'shm.size': _ROLE.format('shm'),
    'nccl.config': _ROLE.format('nccl'),
    'nic.offload': _ROLE.format('nic_offload'),
    'fabric.manager': _ROLE.format('nvidia_driver'),
}

# The role variables the checks read, with the value used when neither the
# inventory nor the owning role's defaults set them. The readiness role builds
# the ``settings`` dict from exactly these names.
SETTING_DEFAULTS = {
    'nodeprep_expected_gpus': 0,
    'nodeprep_kernel_source': 'distro',
    'nodeprep_nvidia_driver_branch': '580',
    'nodeprep_nvidia_driver_version': None,
    'nodeprep_nvidia_driver_module_type': 'open',
    'nodeprep_nvidia_driver_blacklist_nouveau': True,
    'nodeprep_nvidia_driver_persistenced': True,
    'nodeprep_nvidia_driver_fabricmanager': 'auto',
    'nodeprep_nvidia_driver_nvlsm': 'auto',
    'nodeprep_nvidia_driver_open_required_device_ids': [],
    'nodeprep_gpu_settings_power_limit': None,
    'nodeprep_gpu_settings_power_limit_clamp': False,
    'nodeprep_gpu_settings_locked_gpu_clocks': None,
    'nodeprep_gpu_settings_locked_memory_clocks': None,
    'nodeprep_gpu_settings_applications_clocks': None,
    'nodeprep_gpu_settings_apply': True,
    'nodeprep_gpu_settings_boot_persist': True,
    'nodeprep_gpu_settings_gpus': 'all',
    'nodeprep_memlock_limits': True,
    'nodeprep_memlock_verify_users': ['root'],
    'nodeprep_memlock_value': 'unlimited',
    'nodeprep_memlock_systemd_default': True,
    'nodeprep_memlock_services': [],
    'nodeprep_shm_size': None,
    'nodeprep_shm_gpu_memory_ratio': 0.5,
    'nodeprep_shm_min_size': '64G',
    'nodeprep_shm_shrink': False,
    'nodeprep_shm_fstab': True,
    'nodeprep_shm_remount': True,
    'nodeprep_nccl_conf': {},
    'nodeprep_nccl_strict': False,
    'nodeprep_nccl_conf_path': '/etc/nccl.conf',
    'nodeprep_nccl_socket_networks': [],
    'nodeprep_nccl_extra_names': [],
    'nodeprep_nic_offload_interfaces': [],
    'nodeprep_nic_offload_drivers': [],
    'nodeprep_nic_offload_networks': [],
    'nodeprep_nic_offload_features': {},
    'nodeprep_nic_offload_ignore_fixed': False,
    'nodeprep_nic_offload_require_match': False,
    'nodeprep_readiness_xid_fail': [48, 62, 64, 74, 79, 94, 95, 119, 120, 154],
    'nodeprep_readiness_nccl_known_names': [],
    'nodeprep_readiness_skip_checks': [],
}

# Only named in messages (no file is opened here); the shm facts say where they looked.
SHM_PATH = '/dev/shm'  # nosec B108
# /dev/shm counts as full below this much free space: 64 MiB, or 5% of its size when that is more.
SHM_FULL_FREE_BYTES = 64 * 1024 * 1024
SHM_FULL_FREE_RATIO = 0.05

# The unit the gpu_settings role installs to re-apply power limits and clocks at boot.
GPU_SETTINGS_UNIT = 'nodeprep-gpu-settings.service'

# Architectures that require NVIDIA's open kernel modules (the nvidia_driver role's list).
OPEN_ONLY_ARCHITECTURES = ('blackwell', 'rubin', 'rubin ultra', 'feynman')
# PCI device-ID ranges of Blackwell chips (GB100/GB102, GB110/GB112, GB202/GB203, GB206/GB207, GB205), the same
# ranges the nvidia_driver role uses when nvidia-smi cannot run yet; nodeprep_nvidia_driver_open_required_device_ids
# adds more.
OPEN_ONLY_DEVICE_ID_RANGES = ((0x2900, 0x29ff), (0x3180, 0x327f), (0x2b80, 0x2c7f), (0x2d00, 0x2dff),
                              (0x2f00, 0x2f7f))

# Names that NCCL reads (NCCL's environment documentation and NCCL_PARAM names). The nccl role's list, when the
# role passes it through nodeprep_readiness_nccl_known_names, replaces this one.
NCCL_KNOWN_NAMES = frozenset((
    'NCCL_ALGO', 'NCCL_BUFFSIZE', 'NCCL_CHECKS_DISABLE', 'NCCL_COLLNET_ENABLE', 'NCCL_COLLNET_NODE_THRESHOLD',
    'NCCL_COMM_BLOCKING', 'NCCL_COMM_ID', 'NCCL_CROSS_NIC', 'NCCL_CTA_POLICY', 'NCCL_CUMEM_ENABLE',
    'NCCL_CUMEM_HOST_ENABLE', 'NCCL_DEBUG', 'NCCL_DEBUG_FILE', 'NCCL_DEBUG_SUBSYS', 'NCCL_DMABUF_ENABLE',
    'NCCL_GDR_FLUSH_DISABLE', 'NCCL_GDRCOPY_ENABLE', 'NCCL_GRAPH_DUMP_FILE', 'NCCL_GRAPH_FILE',
    'NCCL_GRAPH_MIXING_SUPPORT', 'NCCL_HOSTID', 'NCCL_IB_ADAPTIVE_ROUTING', 'NCCL_IB_AR_THRESHOLD',
    'NCCL_IB_DISABLE', 'NCCL_IB_ECE_ENABLE', 'NCCL_IB_GID_INDEX', 'NCCL_IB_HCA', 'NCCL_IB_MERGE_NICS',
    'NCCL_IB_MERGE_VFS', 'NCCL_IB_PCI_RELAXED_ORDERING', 'NCCL_IB_QPS_PER_CONNECTION', 'NCCL_IB_RETRY_CNT',
    'NCCL_IB_ROCE_VERSION_NUM', 'NCCL_IB_SL', 'NCCL_IB_SPLIT_DATA_ON_QPS', 'NCCL_IB_TC', 'NCCL_IB_TIMEOUT',
    'NCCL_IB_USE_INLINE', 'NCCL_IGNORE_CPU_AFFINITY', 'NCCL_IGNORE_DISABLED_P2P', 'NCCL_LAUNCH_MODE',
    'NCCL_LL128_BUFFSIZE', 'NCCL_LL_BUFFSIZE', 'NCCL_MAX_CTAS', 'NCCL_MAX_NCHANNELS', 'NCCL_MAX_P2P_NCHANNELS',
    'NCCL_MIN_CTAS', 'NCCL_MIN_NCHANNELS', 'NCCL_MIN_P2P_NCHANNELS', 'NCCL_MNNVL_ENABLE', 'NCCL_NCHANNELS_PER_NET_PEER',
    'NCCL_NET', 'NCCL_NET_DISABLE_INTRA', 'NCCL_NET_FORCE_FLUSH', 'NCCL_NET_GDR_C2C', 'NCCL_NET_GDR_LEVEL',
    'NCCL_NET_GDR_READ', 'NCCL_NET_OVERHEAD', 'NCCL_NET_PLUGIN', 'NCCL_NET_SHARED_BUFFERS', 'NCCL_NET_SHARED_COMMS',
    'NCCL_NSOCKS_PERTHREAD', 'NCCL_NTHREADS', 'NCCL_NVB_DISABLE', 'NCCL_NVLS_CHUNKSIZE', 'NCCL_NVLS_ENABLE',
    'NCCL_NVLS_NCHANNELS', 'NCCL_P2P_DIRECT_DISABLE', 'NCCL_P2P_DISABLE', 'NCCL_P2P_LEVEL', 'NCCL_P2P_LL_THRESHOLD',
    'NCCL_P2P_NET_CHUNKSIZE', 'NCCL_P2P_NVL_CHUNKSIZE', 'NCCL_P2P_PCI_CHUNKSIZE', 'NCCL_P2P_READ_ENABLE',
    'NCCL_P2P_USE_CUDA_MEMCPY', 'NCCL_PROFILER_PLUGIN', 'NCCL_PROTO', 'NCCL_PXN_DISABLE', 'NCCL_RAS_ENABLE',
    'NCCL_RUNTIME_CONNECT', 'NCCL_SET_STACK_SIZE', 'NCCL_SET_THREAD_NAME', 'NCCL_SHM_DISABLE',
    'NCCL_SHM_LOCALITY', 'NCCL_SHM_MEMCPY_MODE', 'NCCL_SHM_USE_CUDA_MEMCPY', 'NCCL_SOCKET_FAMILY',
    'NCCL_SOCKET_IFNAME', 'NCCL_SOCKET_NTHREADS', 'NCCL_TOPO_DUMP_FILE', 'NCCL_TOPO_FILE', 'NCCL_TUNER_PLUGIN',
    'NCCL_WORK_FIFO_DEPTH',
))

_SIZE_RE = re.compile(r'^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtp]?)(i?b?)\s*$', re.IGNORECASE)
_SIZE_UNITS = {'': 1, 'k': 1024, 'm': 1024 ** 2, 'g': 1024 ** 3, 't': 1024 ** 4, 'p': 1024 ** 5}
_XID_RE = re.compile(r'NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): ([0-9]+)(?:, (.*))?$')
_BUS_RE = re.compile(r'^(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})(?:\.([0-7]))?$')
_NCCL_LINE_RE = re.compile(r'^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$')
_PAGE = 4096
_MIB = 1024 * 1024
_GIB = 1024 * _MIB


# ---------------------------------------------------------------------------
# small helpers


def _check(check_id, status, expected, observed):
    return {
        'id': check_id,
        'status': status,
        'expected': expected,
        'observed': observed,
        'remedy': REMEDIES[check_id],
    }


def worst(statuses):
    """Return the most severe status among ``statuses`` (``skip`` for none)."""
    present = set(statuses)
    for status in _SEVERITY:
        if status in present:
            return status
    return SKIP


def _get(mapping, *keys):
    """Walk nested dicts; None as soon as a level is missing or not a dict."""
    value = mapping
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def normalize_bus_id(bus_id):
    """Return a PCI address as sysfs names it (``0000:8f:00.0``) from nvidia-smi's or lspci's spelling."""
    text = str(bus_id or '').strip()
    match = _BUS_RE.match(text)
    if not match:
        raise ReadinessError('PCI bus id {0!r} is not DOMAIN:BUS:DEVICE.FUNCTION'.format(bus_id))
    domain, bus, device, function = match.groups()
    return '{0:04x}:{1:02x}:{2:02x}.{3}'.format(int(domain or '0', 16), int(bus, 16), int(device, 16),
                                                function or '0')


def parse_size(value, name):
    """Bytes from an int or a tmpfs-style size (``64G``, ``65536M``, ``64GiB``); None for None/empty."""
    if value is None or value == '':
        return None
    if isinstance(value, bool):
        raise ReadinessError('{0}: {1!r} is not a size; use bytes or a number with K, M, G or T'.format(name, value))
    if isinstance(value, (int, float)):
        return int(value)
    match = _SIZE_RE.match(str(value))
    if not match:
        raise ReadinessError('{0}: {1!r} is not a size; use bytes or a number with K, M, G or T'.format(name, value))
    number, unit, _suffix = match.groups()
    return int(float(number) * _SIZE_UNITS[unit.lower()])


def format_size(num_bytes):
    """Human form of a byte count with binary units (``64.0 GiB``)."""
    if num_bytes is None:
        return 'unknown'
    value = float(num_bytes)
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB'):
        if abs(value) < 1024 or unit == 'TiB':
            if unit == 'B':
                return '{0} B'.format(int(value))
            return '{0:.1f} {1}'.format(value, unit)
        value /= 1024.0
    return '{0} B'.format(int(num_bytes))  # pragma: no cover


def _as_list(value, name):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        return [value]
    raise ReadinessError('{0}: expected a list, got {1!r}'.format(name, value))


def _as_int(value, name):
    if value is None or value == '':
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ReadinessError('{0}: {1!r} is not a whole number'.format(name, value))


def _setting(settings, name):
    if name in settings and settings[name] is not None:
        return settings[name]
    return SETTING_DEFAULTS.get(name)


def _device_id(value):
    """Integer PCI device ID from ``0x2901``, ``2901`` or nvidia-smi's ``0x290110DE``; None when unknown."""
    text = str(value or '').strip().lower()
    if text.startswith('0x'):
        text = text[2:]
    if len(text) == 8:
        text = text[:4]
    try:
        return int(text, 16)
    except ValueError:
        return None


def _limit_ok(observed, desired):
    """limits.conf semantics: ``unlimited`` beats every number."""
    if observed is None:
        return False
    if str(desired) == 'unlimited':
        return str(observed) == 'unlimited'
    if str(observed) == 'unlimited':
        return True
    try:
        return int(observed) >= int(desired)
    except (TypeError, ValueError):
        return False


def _memlock_item(items):
    if not isinstance(items, dict):
        return None
    for key in ('memlock', 'MEMLOCK', 'LimitMEMLOCK'):
        if key in items:
            return items[key]
    return None


def _soft_hard(value):
    if isinstance(value, dict):
        return value.get('soft'), value.get('hard')
    return value, value


def _gpu_label(gpu):
    return 'GPU {0} ({1})'.format(gpu.get('index'), gpu.get('pci_bus_id'))


def _gpus(facts):
    gpus = _get(facts, 'nvidia', 'gpus')
    return gpus if isinstance(gpus, list) else []


def selected_gpus(facts, selection):
    """The GPUs ``nodeprep_gpu_settings_gpus`` chooses (the rule lives in _gpu_settings.select_gpus).

    Raises ReadinessError for a malformed selection and GpuSettingsError when it names no GPU of the node (or an
    index that a lost GPU makes ambiguous).
    """
    try:
        gpu_settings.selection(selection, 'nodeprep_gpu_settings_gpus')
    except gpu_settings.GpuSettingsError as exc:
        raise ReadinessError(exc.msg)
    return gpu_settings.select_gpus(_get(facts, 'nvidia') or {}, selection, name='nodeprep_gpu_settings_gpus')


def is_open_only(facts, extra_ids=()):
    """True when a GPU of the node needs NVIDIA's open kernel modules (Blackwell or newer); the reason as well."""
    extra = set(_device_id(x) for x in extra_ids or ())
    for gpu in _gpus(facts):
        arch = str(gpu.get('architecture') or '').strip().lower()
        if arch in OPEN_ONLY_ARCHITECTURES:
            return True, '{0} is {1}'.format(_gpu_label(gpu), gpu.get('architecture'))
    for dev in _get(facts, 'kernel_state', 'pci', 'gpus') or []:
        number = _device_id(dev.get('device_id'))
        if number is not None and (number in extra or any(lo <= number <= hi for lo, hi in OPEN_ONLY_DEVICE_ID_RANGES)):
            return True, 'PCI {0} has device ID 0x{1:04x} (Blackwell or newer)'.format(dev.get('bus_id'), number)
    return False, None


def _unit(probe, name):
    services = _get(probe, 'services') or {}
    return services.get(name) or services.get(name + '.service') or {}


def _unit_running(unit):
    return unit.get('active_state') == 'active'


def _unit_enabled(unit):
    return unit.get('unit_file_state') in ('enabled', 'enabled-runtime', 'static', 'alias', 'indirect', 'generated')


def _unit_text(name, unit):
    if unit and unit.get('error'):
        return '{0}: unknown ({1})'.format(name, unit['error'])
    if not unit or unit.get('load_state') in (None, 'not-found'):
        return '{0}: not installed'.format(name)
    return '{0}: {1}, {2}'.format(name, unit.get('active_state'), unit.get('unit_file_state'))


# ---------------------------------------------------------------------------
# the checks, one function each


def _kernel_devel(facts, settings, probe):
    ks = facts.get('kernel_state')
    if not isinstance(ks, dict) or not ks.get('running'):
        return _check('kernel.devel_matched', SKIP, 'kernel facts', 'kernel facts were not gathered')
    running = ks['running']
    default = ks.get('default') or running
    devel = ks.get('devel') or {}
    source = _setting(settings, 'nodeprep_kernel_source')
    expected = 'devel/headers installed for the running kernel {0}'.format(running)
    if default != running:
        expected += ' and for the next boot kernel {0}'.format(default)
    problems = []
    notes = []
    for release in sorted(set([running, default])):
        if not devel.get(release):
            problems.append('no devel/headers tree for {0} (/lib/modules/{0}/build)'.format(release))
    if default != running:
        notes.append('the next boot runs {0}, not the running {1}: reboot pending'.format(default, running))
    if source in ('elrepo-lt', 'elrepo-ml') and 'elrepo' not in running:
        notes.append('nodeprep_kernel_source is {0} but the running kernel {1} is not an ELRepo kernel'.format(
            source, running))
    if source == 'distro' and 'elrepo' in running:
        notes.append('nodeprep_kernel_source is distro but the running kernel {0} comes from ELRepo'.format(running))
    if problems:
        return _check('kernel.devel_matched', FAIL, expected, '; '.join(problems + notes))
    if notes:
        return _check('kernel.devel_matched', WARN, expected, '; '.join(notes))
    return _check('kernel.devel_matched', PASS, expected, 'devel/headers present for {0}'.format(running))


def _nouveau(facts, settings, probe):
    nouveau = _get(facts, 'kernel_state', 'nouveau')
    expected = 'nouveau blacklisted and not loaded'
    if not _setting(settings, 'nodeprep_nvidia_driver_blacklist_nouveau'):
        return _check('driver.nouveau_blacklisted', SKIP, 'not managed (nodeprep_nvidia_driver_blacklist_nouveau '
                      'false)', 'not checked')
    if not isinstance(nouveau, dict):
        return _check('driver.nouveau_blacklisted', SKIP, expected, 'kernel facts were not gathered')
    problems = []
    if nouveau.get('loaded'):
        problems.append('nouveau is loaded (reboot after blacklisting)')
    if not nouveau.get('blacklisted'):
        problems.append('nouveau is not blacklisted')
    if problems:
        return _check('driver.nouveau_blacklisted', FAIL, expected, '; '.join(problems))
    files = ', '.join(nouveau.get('blacklist_files') or []) or 'blacklist file'
    return _check('driver.nouveau_blacklisted', PASS, expected, 'blacklisted in {0}, not loaded'.format(files))


def _driver_loaded(facts, settings, probe):
    nvidia = facts.get('nvidia') or {}
    module = _get(facts, 'kernel_state', 'nvidia_module') or {}
    pci_count = _get(facts, 'kernel_state', 'pci', 'gpu_count')
    branch = str(_setting(settings, 'nodeprep_nvidia_driver_branch') or '').strip()
    version = str(_setting(settings, 'nodeprep_nvidia_driver_version') or '').strip()
    if version:
        expected = 'driver {0} loaded and answering'.format(version)
    elif branch:
        expected = 'a driver of branch {0} loaded and answering'.format(branch)
    else:
        expected = 'an NVIDIA driver loaded and answering'
    if pci_count == 0 and not _gpus(facts):
        return _check('driver.loaded', SKIP, expected, 'no NVIDIA GPU on the PCI bus')
    problems = []
    if module and not module.get('loaded'):
        problems.append('the nvidia kernel module is not loaded')
    if not nvidia.get('present') or nvidia.get('error'):
        problems.append('nvidia-smi failed: {0}'.format(nvidia.get('error') or 'not found'))
    loaded = nvidia.get('driver_version')
    if loaded:
        if version and loaded != version:
            problems.append('driver {0} is loaded, {1} wanted'.format(loaded, version))
        elif not version and branch and loaded.split('.')[0] != branch:
            problems.append('driver {0} is loaded, branch {1} wanted'.format(loaded, branch))
        if module.get('version') and module['version'] != loaded:
            problems.append('kernel module {0} differs from user-space driver {1} (reboot or reload)'.format(
                module['version'], loaded))
    if problems:
        return _check('driver.loaded', FAIL, expected, '; '.join(problems))
    return _check('driver.loaded', PASS, expected, 'driver {0} loaded ({1} modules)'.format(
        loaded, module.get('flavour') or 'unknown'))


def _open_modules(facts, settings, probe):
    module = _get(facts, 'kernel_state', 'nvidia_module') or {}
    flavour = module.get('flavour')
    wanted = _setting(settings, 'nodeprep_nvidia_driver_module_type')
    needed, reason = is_open_only(facts, _as_list(_setting(settings, 'nodeprep_nvidia_driver_open_required_device_ids'),
                                                  'nodeprep_nvidia_driver_open_required_device_ids'))
    if needed:
        expected = 'open kernel modules ({0})'.format(reason)
        if flavour == 'open':
            return _check('driver.open_modules', PASS, expected, 'open modules loaded')
        if not module.get('loaded'):
            return _check('driver.open_modules', FAIL, expected, 'no nvidia kernel module loaded')
        return _check('driver.open_modules', FAIL, expected,
                      '{0} modules loaded; Blackwell and newer GPUs need the open ones'.format(flavour or 'unknown'))
    expected = '{0} kernel modules (nodeprep_nvidia_driver_module_type)'.format(wanted)
    if not module.get('loaded') or not flavour:
        return _check('driver.open_modules', SKIP, expected, 'no nvidia kernel module loaded')
    if flavour != wanted:
        return _check('driver.open_modules', WARN, expected, '{0} modules loaded'.format(flavour))
    return _check('driver.open_modules', PASS, expected, '{0} modules loaded'.format(flavour))


def _persistenced(facts, settings, probe):
    expected = 'nvidia-persistenced enabled and running'
    gpus = _gpus(facts)
    if not _setting(settings, 'nodeprep_nvidia_driver_persistenced'):
        return _check('driver.persistenced', SKIP, 'not managed (nodeprep_nvidia_driver_persistenced false)',
                      'not checked')
    if not gpus and not _get(facts, 'kernel_state', 'pci', 'gpu_count'):
        return _check('driver.persistenced', SKIP, expected, 'no NVIDIA GPU on the PCI bus')
    unit = _unit(probe, 'nvidia-persistenced')
    if _unit_running(unit) and _unit_enabled(unit):
        return _check('driver.persistenced', PASS, expected, _unit_text('nvidia-persistenced', unit))
    off = [_gpu_label(g) for g in gpus if g.get('persistence_mode') is not True]
    observed = _unit_text('nvidia-persistenced', unit)
    if _unit_running(unit) and not _unit_enabled(unit):
        return _check('driver.persistenced', FAIL, expected, observed + ' (not started at boot)')
    if gpus and not off:
        return _check('driver.persistenced', WARN, expected,
                      observed + '; persistence mode set by the legacy nvidia-smi -pm 1 on all GPUs')
    if not gpus:
        return _check('driver.persistenced', FAIL, expected, observed)
    return _check('driver.persistenced', FAIL, expected,
                  observed + '; persistence mode off on {0}'.format(', '.join(off)))


def _nvsmi_bus_ids(gpus):
    found = set()
    for gpu in gpus:
        try:
            found.add(normalize_bus_id(gpu.get('pci_bus_id')))
        except ReadinessError:
            continue
    return found


def find_lost_gpus(facts):
    """GPUs the PCI bus shows but nvidia-smi does not list (all of them when nvidia-smi fails or hangs).

    Returns a sorted list of ``{bus_id, reason}`` with sysfs-style bus ids.
    """
    pci = _get(facts, 'kernel_state', 'pci', 'gpus') or []
    nvidia = facts.get('nvidia') or {}
    lost = []
    if not nvidia.get('present') or nvidia.get('error'):
        reason = 'nvidia-smi failed: {0}'.format(nvidia.get('error') or 'not found')
        for dev in pci:
            lost.append({'bus_id': normalize_bus_id(dev.get('bus_id')), 'reason': reason})
        return sorted(lost, key=lambda item: item['bus_id'])
    listed = _nvsmi_bus_ids(_gpus(facts))
    for dev in pci:
        bus_id = normalize_bus_id(dev.get('bus_id'))
        if bus_id not in listed:
            lost.append({'bus_id': bus_id, 'reason': 'on the PCI bus, not listed by nvidia-smi'})
    return sorted(lost, key=lambda item: item['bus_id'])


def _gpu_count(facts, settings, probe):
    expected_gpus = _as_int(_setting(settings, 'nodeprep_expected_gpus'), 'nodeprep_expected_gpus')
    pci_count = _get(facts, 'kernel_state', 'pci', 'gpu_count')
    nvidia = facts.get('nvidia') or {}
    nvsmi_count = len(_gpus(facts))
    if expected_gpus:
        expected = '{0} GPUs in nvidia-smi and on the PCI bus (nodeprep_expected_gpus)'.format(expected_gpus)
    else:
        expected = 'nvidia-smi lists every GPU the PCI bus shows'
    if pci_count is None and not nvidia:
        return _check('gpu.count', SKIP, expected, 'neither kernel nor nvidia facts were gathered')
    observed = 'nvidia-smi: {0}, PCI bus: {1}'.format(
        nvsmi_count if nvidia.get('present') and not nvidia.get('error') else 'failed', pci_count)
    problems = []
    lost = find_lost_gpus(facts)
    if lost:
        problems.append('missing from nvidia-smi: {0}'.format(', '.join(item['bus_id'] for item in lost)))
    if expected_gpus and pci_count is not None and pci_count < expected_gpus:
        problems.append('the PCI bus shows {0} of {1} GPUs'.format(pci_count, expected_gpus))
    if problems:
        return _check('gpu.count', FAIL, expected, observed + '; ' + '; '.join(problems))
    if expected_gpus and nvsmi_count != expected_gpus:
        return _check('gpu.count', WARN, expected, observed + '; more GPUs than nodeprep_expected_gpus')
    if pci_count == 0 and nvsmi_count == 0 and not expected_gpus:
        return _check('gpu.count', SKIP, expected, 'no NVIDIA GPU on the PCI bus')
    return _check('gpu.count', PASS, expected, observed)


def desired_power_limit(setting, gpu, clamp=False):
    """Watts the gpu_settings role would set on ``gpu`` for ``setting`` (the rule lives in _gpu_settings).

    Returns ``(watts, problem)``; problem is a sentence when the role would refuse the value.
    """
    request = _power_request(setting)
    try:
        watts, dummy = gpu_settings.power_limit_watts(request, gpu, clamp, name='nodeprep_gpu_settings_power_limit')
    except gpu_settings.GpuSettingsError as exc:
        return None, exc.msg
    return watts, None


def _power_request(setting):
    try:
        return gpu_settings.parse_power_limit(setting, 'nodeprep_gpu_settings_power_limit')
    except gpu_settings.GpuSettingsError as exc:
        raise ReadinessError(exc.msg)


def _fmt_w(value):
    if value is None:
        return '?'
    return '{0:g}'.format(float(value))


def _power_limit(facts, settings, probe):
    setting = _setting(settings, 'nodeprep_gpu_settings_power_limit')
    if setting is None or setting == '' or not _setting(settings, 'nodeprep_gpu_settings_apply'):
        return _check('gpu.power_limit', SKIP, 'not managed (nodeprep_gpu_settings_power_limit unset or '
                      'nodeprep_gpu_settings_apply false)', 'left as the driver set it')
    request = _power_request(setting)
    expected = 'power limit {0} on {1} (nodeprep_gpu_settings_power_limit)'.format(
        gpu_settings.describe_power_limit(request),
        'every GPU' if _setting(settings, 'nodeprep_gpu_settings_gpus') in (None, '', 'all') else 'the chosen GPUs')
    try:
        gpus = selected_gpus(facts, _setting(settings, 'nodeprep_gpu_settings_gpus'))
    except gpu_settings.GpuSettingsError as exc:
        return _check('gpu.power_limit', FAIL, expected, exc.msg)
    if not gpus:
        return _check('gpu.power_limit', SKIP, expected, 'nvidia-smi lists no GPU')
    clamp = bool(_setting(settings, 'nodeprep_gpu_settings_power_limit_clamp'))
    problems = []
    values = []
    for gpu in gpus:
        watts, problem = desired_power_limit(setting, gpu, clamp)
        if problem:
            problems.append(problem + ' (gpu_settings refuses it)')
            continue
        actual = gpu.get('power_limit_w')
        values.append(actual)
        if not gpu_settings.power_limit_matches(actual, watts):
            problems.append('{0} is at {1} W, wanted {2} W'.format(_gpu_label(gpu), _fmt_w(actual), _fmt_w(watts)))
    if problems:
        return _check('gpu.power_limit', FAIL, expected, '; '.join(problems))
    observed = 'all {0} GPUs at {1} W'.format(len(gpus), ' / '.join(sorted(set(_fmt_w(v) for v in values))))
    unit_name = GPU_SETTINGS_UNIT
    unit = _unit(probe, unit_name)
    if probe is not None and _setting(settings, 'nodeprep_gpu_settings_boot_persist') and not _unit_enabled(unit):
        return _check('gpu.power_limit', WARN, expected,
                      observed + '; {0} (lost at the next reboot)'.format(_unit_text(unit_name, unit)))
    return _check('gpu.power_limit', PASS, expected, observed)


def _clock_setting(settings, name, parse):
    value = _setting(settings, name)
    if value in (None, ''):
        return None
    try:
        parsed = parse(value, name)
    except gpu_settings.GpuSettingsError as exc:
        raise ReadinessError(exc.msg)
    return 'reset' if parsed is None else parsed


def _clocks(facts, settings, probe):
    gpc = _clock_setting(settings, 'nodeprep_gpu_settings_locked_gpu_clocks', gpu_settings.parse_clock_range)
    mem = _clock_setting(settings, 'nodeprep_gpu_settings_locked_memory_clocks', gpu_settings.parse_clock_range)
    app = _clock_setting(settings, 'nodeprep_gpu_settings_applications_clocks', gpu_settings.parse_app_clocks)
    if (gpc is None and mem is None and app is None) or not _setting(settings, 'nodeprep_gpu_settings_apply'):
        return _check('gpu.clocks', SKIP, 'not managed (no clock settings or nodeprep_gpu_settings_apply false)',
                      'left as the driver set them')
    wanted = []
    if isinstance(gpc, dict):
        wanted.append('GPU clocks locked to {0}-{1} MHz'.format(gpc['min_mhz'], gpc['max_mhz']))
    elif gpc == 'reset':
        wanted.append('GPU clock lock reset')
    if isinstance(mem, dict):
        wanted.append('memory clocks locked to {0}-{1} MHz'.format(mem['min_mhz'], mem['max_mhz']))
    elif mem == 'reset':
        wanted.append('memory clock lock reset')
    if isinstance(app, dict):
        wanted.append('applications clocks {0},{1} MHz'.format(app['mem_mhz'], app['graphics_mhz']))
    unit_name = GPU_SETTINGS_UNIT
    persist = bool(_setting(settings, 'nodeprep_gpu_settings_boot_persist'))
    expected = '; '.join(wanted) + ('; re-applied at boot by ' + unit_name if persist else '')
    try:
        gpus = selected_gpus(facts, _setting(settings, 'nodeprep_gpu_settings_gpus'))
    except gpu_settings.GpuSettingsError as exc:
        return _check('gpu.clocks', FAIL, expected, exc.msg)
    if not gpus:
        return _check('gpu.clocks', SKIP, expected, 'nvidia-smi lists no GPU')
    problems = []
    warnings = []
    for gpu in gpus:
        label = _gpu_label(gpu)
        # The range rule of nvidia_gpu (supported clocks .. max clocks). A lock itself cannot be read back (R17).
        for name, value in (('locked_gpu_clocks', gpc), ('locked_memory_clocks', mem)):
            if isinstance(value, dict):
                try:
                    gpu_settings.check_clock_range(gpu, name, value)
                except gpu_settings.GpuSettingsError as exc:
                    problems.append(exc.msg)
        if isinstance(app, dict):
            current = gpu.get('applications_clocks')
            if not current:
                warnings.append('{0}: applications clocks deprecated or not supported by this driver '
                                '(use locked clocks)'.format(label))
            elif (current.get('mem_mhz'), current.get('graphics_mhz')) != (app['mem_mhz'], app['graphics_mhz']):
                problems.append('{0}: applications clocks {1},{2} MHz, wanted {3},{4} MHz'.format(
                    label, current.get('mem_mhz'), current.get('graphics_mhz'), app['mem_mhz'], app['graphics_mhz']))
    unit = _unit(probe, unit_name)
    locks = isinstance(gpc, dict) or isinstance(mem, dict)
    if probe is None or not persist:
        pass
    elif not _unit_enabled(unit):
        text = '{0} (settings lost at the next reboot)'.format(_unit_text(unit_name, unit))
        (problems if locks else warnings).append(text)
    elif unit.get('active_state') == 'failed':
        problems.append('{0}: the last apply failed'.format(_unit_text(unit_name, unit)))
    problems = sorted(set(problems), key=problems.index)
    warnings = sorted(set(warnings), key=warnings.index)
    if problems:
        return _check('gpu.clocks', FAIL, expected, '; '.join(problems + warnings))
    if warnings:
        return _check('gpu.clocks', WARN, expected, '; '.join(warnings))
    observed = 'within the supported range on all {0} GPUs'.format(len(gpus))
    if probe is not None and persist:
        observed += '; ' + _unit_text(unit_name, unit)
    if locks:
        observed += ' (nvidia-smi does not report the locked range itself)'
    return _check('gpu.clocks', PASS, expected, observed)


def parse_xid_lines(lines):
    """NVIDIA Xid events from kernel log lines: list of ``{bus_id, xid, text, line}``."""
    events = []
    for line in lines or []:
        match = _XID_RE.search(line)
        if not match:
            continue
        bus, xid, text = match.groups()
        try:
            bus = normalize_bus_id(bus)
        except ReadinessError:
            pass
        events.append({'bus_id': bus, 'xid': int(xid), 'text': (text or '').strip(), 'line': line.strip()})
    return events


def _health(facts, settings, probe):
    expected = ('no pending page retirement or row remapping, no uncorrectable ECC error, '
                'no Xid event in the kernel log of this boot')
    gpus = _gpus(facts)
    if not gpus:
        return _check('gpu.health', SKIP, expected, 'nvidia-smi lists no GPU')
    fail_codes = set(int(x) for x in _as_list(_setting(settings, 'nodeprep_readiness_xid_fail'),
                                              'nodeprep_readiness_xid_fail'))
    problems = []
    warnings = []
    for gpu in gpus:
        label = _gpu_label(gpu)
        pages = gpu.get('retired_pages') or {}
        rows = gpu.get('remapped_rows') or {}
        ecc = gpu.get('ecc') or {}
        if pages.get('pending'):
            problems.append('{0}: page retirement pending (reset needed)'.format(label))
        if rows.get('pending'):
            problems.append('{0}: row remapping pending (reset needed)'.format(label))
        if rows.get('failure'):
            problems.append('{0}: row remapping failed'.format(label))
        if ecc.get('volatile_uncorrectable'):
            problems.append('{0}: {1} uncorrectable ECC errors since the driver loaded'.format(
                label, ecc['volatile_uncorrectable']))
        elif ecc.get('aggregate_uncorrectable'):
            warnings.append('{0}: {1} uncorrectable ECC errors in its lifetime'.format(
                label, ecc['aggregate_uncorrectable']))
    xid_lines = _get(probe, 'kernel_log', 'lines')
    events = parse_xid_lines(xid_lines)
    by_code = {}
    for event in events:
        by_code.setdefault((event['xid'], event['bus_id']), []).append(event)
    for (xid, bus), found in sorted(by_code.items()):
        text = 'Xid {0} on {1} x{2}: {3}'.format(xid, bus, len(found), found[-1]['text'] or found[-1]['line'])
        (problems if xid in fail_codes else warnings).append(text)
    log_note = ''
    if probe is not None and xid_lines is None:
        log_note = 'kernel log not read: {0}'.format(_get(probe, 'kernel_log', 'error') or 'unknown reason')
        warnings.append(log_note)
    if problems:
        return _check('gpu.health', FAIL, expected, '; '.join(problems + warnings))
    if warnings:
        return _check('gpu.health', WARN, expected, '; '.join(warnings))
    source = _get(probe, 'kernel_log', 'source')
    observed = 'all {0} GPUs healthy'.format(len(gpus))
    if source:
        observed += '; no Xid in {0}'.format(source)
    return _check('gpu.health', PASS, expected, observed)


def _memlock_users(facts, settings, probe):
    desired = _setting(settings, 'nodeprep_memlock_value')
    users = _as_list(_setting(settings, 'nodeprep_memlock_verify_users'), 'nodeprep_memlock_verify_users')
    expected = 'memlock soft and hard {0} for {1}'.format(desired, ', '.join(users) or 'no user')
    effective = _get(facts, 'limits', 'effective')
    if not _setting(settings, 'nodeprep_memlock_limits'):
        return _check('memlock.users', SKIP, expected, 'not managed (nodeprep_memlock_limits false)')
    if not users:
        return _check('memlock.users', SKIP, expected, 'nodeprep_memlock_verify_users is empty')
    if not isinstance(effective, dict):
        return _check('memlock.users', SKIP, expected, 'limits facts were not gathered')
    problems = []
    seen = []
    for user in users:
        if user not in effective:
            problems.append('{0}: not reported (no such user?)'.format(user))
            continue
        soft, hard = _soft_hard(_memlock_item(effective[user]))
        seen.append('{0} {1}/{2}'.format(user, soft, hard))
        if not (_limit_ok(soft, desired) and _limit_ok(hard, desired)):
            problems.append('{0}: soft {1}, hard {2}'.format(user, soft, hard))
    if problems:
        return _check('memlock.users', FAIL, expected, '; '.join(problems))
    return _check('memlock.users', PASS, expected, ', '.join(seen))


def _memlock_services(facts, settings, probe):
    desired = _setting(settings, 'nodeprep_memlock_value')
    want_default = bool(_setting(settings, 'nodeprep_memlock_systemd_default'))
    services = [re.sub(r'\.service$', '', str(s)) for s in
                _as_list(_setting(settings, 'nodeprep_memlock_services'), 'nodeprep_memlock_services')]
    parts = []
    if want_default:
        parts.append('systemd DefaultLimitMEMLOCK')
    parts.extend('{0} LimitMEMLOCK'.format(s) for s in services)
    expected = '{0} for {1}'.format(desired, ', '.join(parts) or 'no service')
    if not want_default and not services:
        return _check('memlock.services', SKIP, expected, 'no systemd memlock setting managed')
    systemd = _get(facts, 'limits', 'systemd')
    if not isinstance(systemd, dict):
        return _check('memlock.services', SKIP, expected, 'limits facts were not gathered')
    problems = []
    seen = []
    warnings = []
    if systemd.get('reason') and _memlock_item(systemd.get('default')) is None:
        return _check('memlock.services', WARN, expected, 'systemd was not asked: {0}'.format(systemd['reason']))
    if want_default:
        soft, hard = _soft_hard(_memlock_item(systemd.get('default')))
        seen.append('default {0}/{1}'.format(soft, hard))
        if not (_limit_ok(soft, desired) and _limit_ok(hard, desired)):
            problems.append('systemd default memlock soft {0}, hard {1}'.format(soft, hard))
    for service in services:
        items = _get(systemd, 'services', service)
        if items is None:
            warnings.append('{0}: not reported (service not installed?)'.format(service))
            continue
        soft, hard = _soft_hard(_memlock_item(items))
        seen.append('{0} {1}/{2}'.format(service, soft, hard))
        if not (_limit_ok(soft, desired) and _limit_ok(hard, desired)):
            problems.append('{0}: memlock soft {1}, hard {2}'.format(service, soft, hard))
    if problems:
        return _check('memlock.services', FAIL, expected, '; '.join(problems + warnings))
    if warnings:
        return _check('memlock.services', WARN, expected, '; '.join(seen + warnings))
    return _check('memlock.services', PASS, expected, ', '.join(seen))


def desired_shm_size(facts, settings):
    """Bytes the shm role would give /dev/shm and the sentence saying why; None when it cannot tell.

    Like the role: an explicit nodeprep_shm_size rounded up to a page; otherwise nodeprep_shm_gpu_memory_ratio of
    the node's total GPU memory rounded up to a GiB, and never less than nodeprep_shm_min_size.
    """
    explicit = parse_size(_setting(settings, 'nodeprep_shm_size'), 'nodeprep_shm_size')
    if explicit is not None:
        size = _round_page(explicit)
        return size, '{0} (nodeprep_shm_size)'.format(format_size(size))
    ratio = float(_setting(settings, 'nodeprep_shm_gpu_memory_ratio'))
    floor = _round_page(parse_size(_setting(settings, 'nodeprep_shm_min_size'), 'nodeprep_shm_min_size') or 0)
    total = sum(int(g.get('memory_total_mib') or 0) for g in _gpus(facts)) * _MIB
    if not total and not floor:
        return None, 'no GPU memory reported and no nodeprep_shm_min_size'
    from_gpus = (int(math.ceil(total * ratio)) + _GIB - 1) // _GIB * _GIB
    size = max(from_gpus, floor)
    why = '{0} = max({1:g} x {2} of GPU memory, nodeprep_shm_min_size {3})'.format(
        format_size(size), ratio, format_size(total), format_size(floor))
    return size, why


def _round_page(num_bytes):
    return (num_bytes + _PAGE - 1) // _PAGE * _PAGE


def _shm(facts, settings, probe):
    shm = facts.get('shm')
    size, why = desired_shm_size(facts, settings)
    fstab_wanted = bool(_setting(settings, 'nodeprep_shm_fstab'))
    expected = '{0} tmpfs of {1}{2}'.format(SHM_PATH, why, ', live and in fstab' if fstab_wanted else '')
    if not isinstance(shm, dict):
        return _check('shm.size', SKIP, expected, 'shm facts were not gathered')
    if size is None:
        return _check('shm.size', SKIP, expected, why)
    if not shm.get('mounted') or shm.get('fstype') not in (None, 'tmpfs'):
        return _check('shm.size', FAIL, expected, '{0} is not a mounted tmpfs'.format(SHM_PATH))
    live = shm.get('size_bytes')
    fstab = shm.get('fstab') or {}
    fstab_size = fstab.get('size_bytes')
    observed = 'live {0}, fstab {1}'.format(
        format_size(live), format_size(fstab_size) if fstab_size else ('no size' if fstab else 'no entry'))
    problems = []
    live_problems = []
    if live is None or live < size:
        live_problems.append('too small')
    elif live > size and _setting(settings, 'nodeprep_shm_shrink'):
        live_problems.append('larger than wanted and nodeprep_shm_shrink is true')
    if not _setting(settings, 'nodeprep_shm_remount'):
        live_problems = [text + ' (live size not managed: nodeprep_shm_remount is false)' for text in live_problems]
    else:
        problems, live_problems = live_problems, []
    # A larger size is fine (a GPU that fell off the bus lowers the target; that is gpu.count's failure, not
    # this one's) unless shrinking is asked for.
    shrink = _setting(settings, 'nodeprep_shm_shrink')
    if fstab_wanted and (fstab_size is None or fstab_size < size or (shrink and fstab_size > size)):
        problems.append('the fstab entry does not keep {0} across reboots'.format(format_size(size)))
    free = shm.get('free_bytes')
    if free is not None and live and free < max(SHM_FULL_FREE_BYTES, live * SHM_FULL_FREE_RATIO):
        # A full /dev/shm makes NCCL's shared-memory transport and DataLoader workers fail in ways that look like
        # network timeouts; stale segments of crashed jobs are the usual cause.
        problems.append('full: only {0} free (stale segments of crashed jobs? see ls -la {1})'.format(
            format_size(free), SHM_PATH))
    if problems:
        return _check('shm.size', FAIL, expected, observed + '; ' + '; '.join(problems + live_problems))
    if live_problems:
        return _check('shm.size', WARN, expected, observed + '; ' + '; '.join(live_problems))
    return _check('shm.size', PASS, expected, observed)


def parse_nccl_conf(content):
    """``NAME=value`` pairs of an nccl.conf (comments and blank lines ignored), in file order."""
    pairs = []
    for number, line in enumerate((content or '').splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith('#'):
            continue
        match = _NCCL_LINE_RE.match(stripped)
        if not match:
            raise ReadinessError('nccl.conf line {0}: {1!r} is not NAME=value'.format(number, line))
        pairs.append((match.group(1), match.group(2)))
    return pairs


def _nccl(facts, settings, probe):
    wanted = _setting(settings, 'nodeprep_nccl_conf') or {}
    if not isinstance(wanted, dict):
        raise ReadinessError('nodeprep_nccl_conf: expected a dict of NAME: value, got {0!r}'.format(wanted))
    wanted = dict((str(k), _nccl_value(v)) for k, v in wanted.items())
    networks = _as_list(_setting(settings, 'nodeprep_nccl_socket_networks'), 'nodeprep_nccl_socket_networks')
    if networks and isinstance(facts.get('nics'), dict):
        wanted['NCCL_SOCKET_IFNAME'] = '=' + ','.join(select_nics(facts['nics'], networks=networks,
                                                                  what='nodeprep_nccl_socket_networks'))
    strict = bool(_setting(settings, 'nodeprep_nccl_strict'))
    path = _setting(settings, 'nodeprep_nccl_conf_path')
    known = set(_as_list(_setting(settings, 'nodeprep_readiness_nccl_known_names'),
                         'nodeprep_readiness_nccl_known_names')) or set(NCCL_KNOWN_NAMES)
    known.update(_as_list(_setting(settings, 'nodeprep_nccl_extra_names'), 'nodeprep_nccl_extra_names'))
    names = ', '.join('{0}={1}'.format(k, v) for k, v in sorted(wanted.items()))
    expected = '{0} with {1}; only names NCCL reads'.format(path, names or 'no setting')
    conf = _get(probe, 'nccl_conf')
    if not isinstance(conf, dict):
        return _check('nccl.config', SKIP, expected, '{0} was not read'.format(path))
    if conf.get('error'):
        return _check('nccl.config', FAIL, expected, conf['error'])
    if not conf.get('exists'):
        if wanted:
            return _check('nccl.config', FAIL, expected, '{0} does not exist'.format(path))
        return _check('nccl.config', SKIP, expected, '{0} does not exist and nothing is configured'.format(path))
    try:
        pairs = parse_nccl_conf(conf.get('content'))
    except ReadinessError as exc:
        return _check('nccl.config', FAIL, expected, '{0}: {1}'.format(path, exc))
    found = dict(pairs)
    problems = []
    for name, value in sorted(wanted.items()):
        if name not in found:
            problems.append('{0} missing'.format(name))
        elif found[name] != value:
            problems.append('{0}={1}, wanted {2}'.format(name, found[name], value))
    unknown = [name for name, _value in pairs if name not in known]
    unknown_text = 'names NCCL does not read: {0}'.format(', '.join(unknown)) if unknown else ''
    if problems or (unknown and strict):
        return _check('nccl.config', FAIL, expected, '; '.join(problems + ([unknown_text] if unknown else [])))
    if unknown:
        return _check('nccl.config', WARN, expected, unknown_text)
    return _check('nccl.config', PASS, expected, '{0}: {1} settings, all known to NCCL'.format(path, len(pairs)))


def _nccl_value(value):
    if isinstance(value, bool):
        return '1' if value else '0'
    return str(value)


def select_nics(nics, interfaces=(), drivers=(), networks=(), what='nodeprep_nic_offload_networks'):
    """Names of the NICs chosen by name, by driver or by an IPv4/IPv6 address inside one of the CIDRs."""
    chosen = []
    parsed = []
    for cidr in networks:
        try:
            parsed.append(ipaddress.ip_network(str(cidr), strict=False))
        except ValueError:
            raise ReadinessError('{0}: {1!r} is not a network in CIDR form'.format(what, cidr))
    for name in sorted(nics or {}):
        nic = nics[name] or {}
        if name in interfaces:
            chosen.append(name)
            continue
        if _get(nic, 'driver', 'driver') in drivers:
            chosen.append(name)
            continue
        addresses = list(_get(nic, 'addresses', 'ipv4') or []) + list(_get(nic, 'addresses', 'ipv6') or [])
        for address in addresses:
            try:
                ip = ipaddress.ip_interface(str(address)).ip
            except ValueError:
                continue
            if any(ip.version == net.version and ip in net for net in parsed):
                chosen.append(name)
                break
    return chosen


def _nic_offload(facts, settings, probe):
    features = _setting(settings, 'nodeprep_nic_offload_features') or {}
    interfaces = _as_list(_setting(settings, 'nodeprep_nic_offload_interfaces'), 'nodeprep_nic_offload_interfaces')
    drivers = _as_list(_setting(settings, 'nodeprep_nic_offload_drivers'), 'nodeprep_nic_offload_drivers')
    networks = _as_list(_setting(settings, 'nodeprep_nic_offload_networks'), 'nodeprep_nic_offload_networks')
    wanted = ', '.join('{0} {1}'.format(k, 'on' if v else 'off') for k, v in sorted(features.items()))
    expected = '{0} on the NICs chosen by name, driver or network'.format(wanted or 'no feature')
    if not features or not (interfaces or drivers or networks):
        return _check('nic.offload', SKIP, expected, 'no NIC offload setting managed')
    nics = facts.get('nics')
    if not isinstance(nics, dict):
        return _check('nic.offload', SKIP, expected, 'nic facts were not gathered')
    chosen = select_nics(nics, interfaces, drivers, networks)
    missing = [name for name in interfaces if name not in nics]
    if not chosen:
        status = FAIL if _setting(settings, 'nodeprep_nic_offload_require_match') else SKIP
        return _check('nic.offload', status, expected, 'no NIC matches (interfaces {0}, drivers {1}, networks {2})'.format(
            ', '.join(interfaces) or '-', ', '.join(drivers) or '-', ', '.join(networks) or '-'))
    ignore_fixed = bool(_setting(settings, 'nodeprep_nic_offload_ignore_fixed'))
    problems = ['{0}: no such interface'.format(name) for name in missing]
    warnings = []
    for name in chosen:
        have = _get(nics, name, 'features') or {}
        for feature, enabled in sorted(features.items()):
            state = have.get(feature)
            if state is None:
                problems.append('{0}: no feature {1} in ethtool -k'.format(name, feature))
            elif bool(state.get('enabled')) != bool(enabled):
                text = '{0}: {1} is {2}'.format(name, feature, 'on' if state.get('enabled') else 'off')
                if state.get('fixed') and ignore_fixed:
                    warnings.append(text + ' [fixed]: the driver does not allow a change')
                elif state.get('fixed'):
                    problems.append(text + ' [fixed]: the driver does not allow a change '
                                    '(nodeprep_nic_offload_ignore_fixed)')
                else:
                    problems.append(text)
    if problems:
        return _check('nic.offload', FAIL, expected, '; '.join(problems + warnings))
    if warnings:
        return _check('nic.offload', WARN, expected, '; '.join(warnings))
    return _check('nic.offload', PASS, expected, 'as wanted on {0}'.format(', '.join(chosen)))


def _want(setting, auto):
    """The nvidia_driver role's always/auto/never switches (booleans accepted)."""
    if setting is True or str(setting).lower() in ('always', 'true', 'yes'):
        return True
    if str(setting).lower() == 'auto':
        return auto
    return False


def _fabric(facts, settings, probe):
    switches = _get(facts, 'kernel_state', 'pci', 'nvswitch_count') or 0
    expected = 'nvidia-fabricmanager running and every GPU fabric state Completed/Success'
    open_only, _reason = is_open_only(facts, _as_list(
        _setting(settings, 'nodeprep_nvidia_driver_open_required_device_ids'),
        'nodeprep_nvidia_driver_open_required_device_ids'))
    want_fm = _want(_setting(settings, 'nodeprep_nvidia_driver_fabricmanager'), switches > 0)
    want_nvlsm = _want(_setting(settings, 'nodeprep_nvidia_driver_nvlsm'), switches > 0 and open_only)
    names = (['nvidia-fabricmanager'] if want_fm else []) + (['nvlsm'] if want_nvlsm else [])
    if names:
        expected = '{0} running, every GPU fabric state Completed/Success'.format(' and '.join(names))
    if not switches and not names:
        return _check('fabric.manager', SKIP, expected, 'no NVSwitch on the PCI bus')
    if not names:
        return _check('fabric.manager', SKIP, expected, 'not managed (nodeprep_nvidia_driver_fabricmanager)')
    problems = []
    seen = []
    units_bad = False
    for name in names:
        unit = _unit(probe, name)
        seen.append(_unit_text(name, unit))
        if probe is not None and not (_unit_running(unit) and _unit_enabled(unit)):
            units_bad = True
    for gpu in _gpus(facts):
        fabric = gpu.get('fabric')
        if not fabric:
            continue
        state, status = fabric.get('state'), fabric.get('status')
        if state != 'Completed' or (status not in (None, 'Success')):
            problems.append('{0}: fabric {1}/{2}'.format(_gpu_label(gpu), state, status))
    observed = '{0} NVSwitches; {1}'.format(switches, ', '.join(seen))
    if problems:
        return _check('fabric.manager', FAIL, expected, observed + '; ' + '; '.join(problems))
    if units_bad:
        return _check('fabric.manager', FAIL, expected, observed)
    return _check('fabric.manager', PASS, expected, observed)


_CHECKS = (
    ('kernel.devel_matched', _kernel_devel),
    ('driver.nouveau_blacklisted', _nouveau),
    ('driver.loaded', _driver_loaded),
    ('driver.open_modules', _open_modules),
    ('driver.persistenced', _persistenced),
    ('gpu.count', _gpu_count),
    ('gpu.power_limit', _power_limit),
    ('gpu.clocks', _clocks),
    ('gpu.health', _health),
    ('memlock.users', _memlock_users),
    ('memlock.services', _memlock_services),
    ('shm.size', _shm),
    ('nccl.config', _nccl),
    ('nic.offload', _nic_offload),
    ('fabric.manager', _fabric),
)


def evaluate(facts, settings, probe=None):
    """Run every readiness check.

    ``facts``: the namespaces gpu_node_facts gathers (nvidia, kernel_state, limits, shm, nics); a missing namespace
    turns the checks that need it into ``skip``. ``settings``: role variables by their names (see
    SETTING_DEFAULTS); missing ones take the roles' defaults. ``probe``: what readiness_check read on the node
    (``nccl_conf``, ``kernel_log``, ``services``); None when it was not read.
    Returns the checks in CHECK_IDS order. Raises ReadinessError for a malformed setting.
    """
    if not isinstance(facts, dict):
        raise ReadinessError('facts: expected a dict of fact namespaces, got {0}'.format(type(facts).__name__))
    settings = settings or {}
    if not isinstance(settings, dict):
        raise ReadinessError('settings: expected a dict of role variables, got {0}'.format(type(settings).__name__))
    skipped = set(_as_list(_setting(settings, 'nodeprep_readiness_skip_checks'), 'nodeprep_readiness_skip_checks'))
    unknown = sorted(skipped - set(CHECK_IDS))
    if unknown:
        raise ReadinessError('nodeprep_readiness_skip_checks: unknown check ids {0}; known: {1}'.format(
            ', '.join(unknown), ', '.join(CHECK_IDS)))
    results = []
    for check_id, func in _CHECKS:
        if check_id in skipped:
            results.append(_check(check_id, SKIP, 'skipped by nodeprep_readiness_skip_checks', 'not checked'))
            continue
        results.append(func(facts, settings, probe))
    return results


def summarize(checks):
    """Counts per status and the host's overall status (``fail`` beats ``warn`` beats ``pass``)."""
    counts = dict((status, 0) for status in STATUSES)
    for check in checks:
        counts[check['status']] = counts.get(check['status'], 0) + 1
    counts['status'] = worst(c['status'] for c in checks)
    return counts


# ---------------------------------------------------------------------------
# the controller-side report


def build_report(hosts, results, generated, unreachable=None):
    """The report as one dict: ``{generated, summary, check_ids, hosts: {name: {status, msg, checks}}}``.

    ``hosts`` lists every host of the play, in order. ``results`` maps a host to what readiness_check returned
    (``checks``); a host without a result, or whose result says ``unreachable``, is ``unreachable``
    (``unreachable`` may give the reason per host).
    A result with ``failed`` but no checks (the gather failed) becomes a host with one failed ``facts.gather``.
    """
    unreachable = unreachable or {}
    out_hosts = {}
    order = []
    summary = {'hosts': 0, 'ready': 0, 'not_ready': 0, 'unreachable': 0}
    summary.update((status, 0) for status in STATUSES)
    for host in hosts:
        if host in out_hosts:
            continue
        order.append(host)
        summary['hosts'] += 1
        result = results.get(host)
        if not result or host in unreachable or result.get('unreachable'):
            reason = (unreachable.get(host) or (result or {}).get('msg')
                      or 'no result: the host was unreachable or failed before the check')
            out_hosts[host] = {'status': UNREACHABLE, 'msg': str(reason), 'checks': []}
            summary['unreachable'] += 1
            continue
        checks = result.get('checks') or []
        if not checks:
            checks = [{'id': 'facts.gather', 'status': FAIL, 'expected': 'facts gathered',
                       'observed': str(result.get('msg') or 'the check returned nothing'),
                       'remedy': 'read the error; run playbooks/readiness.yml with -vvv on this host'}]
        counts = summarize(checks)
        for status in STATUSES:
            summary[status] += counts[status]
        host_status = 'not_ready' if counts['status'] == FAIL else 'ready'
        summary[host_status] += 1
        out_hosts[host] = {'status': host_status, 'worst': counts['status'], 'msg': '',
                           'checks': [dict((k, c.get(k)) for k in ('id', 'status', 'expected', 'observed', 'remedy'))
                                      for c in checks]}
    check_ids = list(CHECK_IDS)
    for host in order:
        for check in out_hosts[host]['checks']:
            if check['id'] not in check_ids:
                check_ids.append(check['id'])
    return {'generated': generated, 'summary': summary, 'check_ids': check_ids, 'host_order': order,
            'hosts': out_hosts}


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=True) + '\n'


_XML_ESCAPES = (('&', '&amp;'), ('<', '&lt;'), ('>', '&gt;'), ('"', '&quot;'), ("'", '&#x27;'))


def _escape(text):
    """Text safe inside XML/HTML element content and double-quoted attributes."""
    text = str(text if text is not None else '')
    for char, entity in _XML_ESCAPES:
        text = text.replace(char, entity)
    return text


def _xml_quoteattr(text):
    return '"{0}"'.format(_escape(text).replace('\n', '&#10;').replace('\r', '&#13;').replace('\t', '&#9;'))


def _cdata_safe(text):
    return _escape(text)


def render_junit(report):
    """JUnit XML: a testsuite per host, a testcase per check; fail -> <failure>, skip -> <skipped>,
    warn -> passed with <system-out>; an unreachable host -> one errored testcase ``host.reachable``."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>']
    summary = report['summary']
    total = sum(max(1, len(report['hosts'][h]['checks'])) for h in report['host_order'])
    lines.append('<testsuites name="gpufleet.nodeprep readiness" tests="{0}" failures="{1}" errors="{2}" '
                 'skipped="{3}" timestamp={4}>'.format(total, summary[FAIL], summary['unreachable'], summary[SKIP],
                                                       _xml_quoteattr(str(report['generated']))))
    for host in report['host_order']:
        entry = report['hosts'][host]
        if entry['status'] == UNREACHABLE:
            lines.append('  <testsuite name={0} tests="1" failures="0" errors="1" skipped="0">'.format(
                _xml_quoteattr(host)))
            lines.append('    <testcase classname={0} name="host.reachable">'.format(_xml_quoteattr(host)))
            lines.append('      <error type="unreachable" message={0}/>'.format(_xml_quoteattr(entry['msg'])))
            lines.append('    </testcase>')
            lines.append('  </testsuite>')
            continue
        checks = entry['checks']
        counts = summarize(checks)
        lines.append('  <testsuite name={0} tests="{1}" failures="{2}" errors="0" skipped="{3}">'.format(
            _xml_quoteattr(host), len(checks), counts[FAIL], counts[SKIP]))
        for check in checks:
            lines.append('    <testcase classname={0} name={1}>'.format(_xml_quoteattr(host),
                                                                        _xml_quoteattr(check['id'])))
            detail = 'expected: {0}\nobserved: {1}\nremedy: {2}'.format(check['expected'], check['observed'],
                                                                        check['remedy'])
            if check['status'] == FAIL:
                lines.append('      <failure type="fail" message={0}>{1}</failure>'.format(
                    _xml_quoteattr(str(check['observed'])), _cdata_safe(detail)))
            elif check['status'] == SKIP:
                lines.append('      <skipped message={0}/>'.format(_xml_quoteattr(str(check['observed']))))
            elif check['status'] == WARN:
                lines.append('      <system-out>{0}</system-out>'.format(_cdata_safe('WARN\n' + detail)))
            lines.append('    </testcase>')
        lines.append('  </testsuite>')
    lines.append('</testsuites>')
    return '\n'.join(lines) + '\n'


_HTML_COLOURS = {
    PASS: ('#1b7f3b', '#e6f4ea'),
    WARN: ('#8a5a00', '#fff4d6'),
    FAIL: ('#b3261e', '#fde7e6'),
    SKIP: ('#5f6368', '#f1f3f4'),
    UNREACHABLE: ('#ffffff', '#6b2c91'),
}


def _h(text):
    return _escape(text)


def render_html(report):
    """A self-contained HTML page: hosts as rows, check ids as columns, a coloured cell per status with the
    details in its title, then a details section listing every check that is not ``pass``."""
    ids = report['check_ids']
    summary = report['summary']
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           '<title>gpufleet.nodeprep readiness report</title>', '<style>',
           'body{font-family:sans-serif;margin:1.5em;color:#202124}',
           'table{border-collapse:collapse;font-size:13px}',
           'th,td{border:1px solid #c0c4c8;padding:4px 6px;text-align:center}',
           'th.check{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}',
           'td.host{text-align:left;font-weight:bold}']
    for status, (fg, bg) in sorted(_HTML_COLOURS.items()):
        out.append('.{0}{{color:{1};background:{2}}}'.format(status, fg, bg))
    out += ['</style>', '</head>', '<body>', '<h1>gpufleet.nodeprep readiness report</h1>']
    out.append('<p id="summary">Generated {0}. Hosts: {1} ({2} ready, {3} not ready, {4} unreachable). '
               'Checks: {5} pass, {6} warn, {7} fail, {8} skip.</p>'.format(
                   _h(report['generated']), summary['hosts'], summary['ready'], summary['not_ready'],
                   summary['unreachable'], summary[PASS], summary[WARN], summary[FAIL], summary[SKIP]))
    out.append('<table id="matrix">')
    out.append('<tr><th>host</th><th>status</th>' + ''.join(
        '<th class="check">{0}</th>'.format(_h(check_id)) for check_id in ids) + '</tr>')
    for host in report['host_order']:
        entry = report['hosts'][host]
        by_id = dict((c['id'], c) for c in entry['checks'])
        row = ['<tr><td class="host">{0}</td>'.format(_h(host))]
        if entry['status'] == UNREACHABLE:
            row.append('<td class="unreachable" title="{0}">unreachable</td>'.format(_h(entry['msg'])))
            row.append('<td class="unreachable" colspan="{0}" title="{1}">unreachable</td>'.format(
                len(ids), _h(entry['msg'])))
        else:
            row.append('<td class="{0}">{1}</td>'.format(_h(entry['worst']), _h(entry['status'])))
            for check_id in ids:
                check = by_id.get(check_id)
                if check is None:
                    row.append('<td class="skip" title="not run">-</td>')
                    continue
                title = 'expected: {0}\nobserved: {1}\nremedy: {2}'.format(
                    check['expected'], check['observed'], check['remedy'])
                row.append('<td class="{0}" title="{1}">{2}</td>'.format(
                    _h(check['status']), _h(title), _h(check['status'])))
        row.append('</tr>')
        out.append(''.join(row))
    out.append('</table>')
    out.append('<h2>Details</h2>')
    out.append('<table id="details">')
    out.append('<tr><th>host</th><th>check</th><th>status</th><th>expected</th><th>observed</th>'
               '<th>remedy</th></tr>')
    for host in report['host_order']:
        entry = report['hosts'][host]
        if entry['status'] == UNREACHABLE:
            out.append('<tr><td class="host">{0}</td><td>host.reachable</td><td class="unreachable">unreachable</td>'
                       '<td>reachable over SSH</td><td>{1}</td><td>check the node and the connection</td></tr>'.format(
                           _h(host), _h(entry['msg'])))
            continue
        for check in entry['checks']:
            if check['status'] == PASS:
                continue
            out.append('<tr><td class="host">{0}</td><td>{1}</td><td class="{2}">{2}</td><td>{3}</td><td>{4}</td>'
                       '<td>{5}</td></tr>'.format(_h(host), _h(check['id']), _h(check['status']),
                                                  _h(check['expected']), _h(check['observed']),
                                                  _h(check['remedy'])))
    out += ['</table>', '</body>', '</html>']
    return '\n'.join(out) + '\n'


_MATRIX_MARKS = {PASS: '.', WARN: 'W', FAIL: 'F', SKIP: '-', None: ' '}


def render_matrix(report):
    """A compact text matrix for the end of the run: one line per host, one column per check."""
    ids = report['check_ids']
    width = max([len(h) for h in report['host_order']] + [4])
    lines = ['checks: ' + '  '.join('{0}={1}'.format(i + 1, check_id) for i, check_id in enumerate(ids))]
    lines.append('{0}  {1}  {2}'.format('host'.ljust(width), ' '.join('{0:>2}'.format(i + 1)
                                                                      for i in range(len(ids))), 'status'))
    for host in report['host_order']:
        entry = report['hosts'][host]
        if entry['status'] == UNREACHABLE:
            cells = ' '.join(' ?' for dummy in ids)
        else:
            by_id = dict((c['id'], c['status']) for c in entry['checks'])
            cells = ' '.join('{0:>2}'.format(_MATRIX_MARKS.get(by_id.get(i), '?')) for i in ids)
        lines.append('{0}  {1}  {2}'.format(host.ljust(width), cells, entry['status']))
    summary = report['summary']
    lines.append('legend: . pass  W warn  F fail  - skip  ? unreachable; hosts {0}: {1} ready, {2} not ready, '
                 '{3} unreachable'.format(summary['hosts'], summary['ready'], summary['not_ready'],
                                          summary['unreachable']))
    return '\n'.join(lines)
