# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Data only (no tests): fact sets for the readiness tests: an 8x B200 HGX node, freshly provisioned or converged.

The GPU values (bus ids, 183359 MiB, power limits 200-1000 W with a 1000 W default, max clocks 1965/3996 MHz,
device ID 0x2901, driver 580.105.08, fabric Completed/Success) are those of the real capture
tests/fixtures/nvidia-smi-xml/b200-8gpu_k8s-test-infra.xml; test_readiness.py checks them against it.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import hashlib
import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _nvswitch_fabric
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_dcgm
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_kernel
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_memlock
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nccl
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nic_offload
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_imex
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nvidia_driver
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_perf_tools
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_rdma
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_shm
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness as r
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nvidia_smi_topo
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _driver_packages
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))


def role_settings():
    """The settings the readiness_info action hands to the checks when the inventory sets nothing: the readiness
    role's own SETTINGS defaults, and the collection-wide nodeprep_expected_gpus with its default (typed with the
    nvidia_driver role's SETTINGS)."""
    settings = dict((name, copy.deepcopy(spec.get('default'))) for name, spec in _readiness_settings.SETTINGS.items())
    settings['nodeprep_expected_gpus'] = _plan_nvidia_driver.SETTINGS['nodeprep_expected_gpus']['default']
    return settings


BUS_IDS = ['00000000:8F:00.0', '00000000:90:00.0', '00000000:96:00.0', '00000000:97:00.0',
           '00000000:C4:00.0', '00000000:C5:00.0', '00000000:CB:00.0', '00000000:CC:00.0']
SYSFS_IDS = ['0000:8f:00.0', '0000:90:00.0', '0000:96:00.0', '0000:97:00.0',
             '0000:c4:00.0', '0000:c5:00.0', '0000:cb:00.0', '0000:cc:00.0']
SWITCH_IDS = ['0000:05:00.0', '0000:06:00.0']
RUNNING = '5.14.0-570.58.1.el9_6.x86_64'
GIB = 1024 ** 3


def gpu(index):
    return {
        'index': index, 'pci_bus_id': BUS_IDS[index], 'uuid': 'GPU-00000000-0000-0000-0000-00000000000{0}'.format(index),
        'name': 'NVIDIA B200', 'architecture': 'Blackwell', 'persistence_mode': True, 'memory_total_mib': 183359,
        'power_limit_w': 700.0, 'default_power_limit_w': 1000.0, 'min_power_limit_w': 200.0,
        'max_power_limit_w': 1000.0, 'mig_mode': 'Disabled', 'compute_mode': 'Default',
        # at the lock of the converged node's settings (1500-1965 MHz): a locked GPU runs within its lock, even idle
        'clocks': {'graphics_mhz': 1965, 'sm_mhz': 1965, 'mem_mhz': 3996, 'video_mhz': 660},
        'applications_clocks': {'graphics_mhz': 1965, 'mem_mhz': 3996},
        'default_applications_clocks': {'graphics_mhz': 1965, 'mem_mhz': 3996},
        'max_clocks': {'graphics_mhz': 1965, 'sm_mhz': 1965, 'mem_mhz': 3996},
        'supported_clocks': None,
        'ecc': {'current': 'Enabled', 'pending': 'Enabled', 'volatile_uncorrectable': 0, 'aggregate_uncorrectable': 0},
        'retired_pages': None,
        'remapped_rows': {'pending': False, 'failure': False, 'correctable': 0, 'uncorrectable': 0},
        'fabric': {'state': 'Completed', 'status': 'Success'},
        'pci_device_id': '0x2901',
        # As the B200 capture prints them (tests/fixtures/nvidia-smi-xml/b200-8gpu_k8s-test-infra.xml): idle, Gen5 x16.
        'clocks_event_reasons': {'gpu_idle': True, 'applications_clocks_setting': False, 'sw_power_cap': False,
                                 'hw_slowdown': False, 'hw_thermal_slowdown': False, 'hw_power_brake_slowdown': False,
                                 'sync_boost': False, 'sw_thermal_slowdown': False, 'display_clocks_setting': False},
        'pcie': {'gen_current': 5, 'gen_max': 5, 'gen_device_current': 5, 'gen_device_max': 5, 'gen_host_max': None,
                 'width_current': 16, 'width_max': 16, 'replay_counter': 0},
        'vbios_version': '97.00.FA.00.09', 'mig_pending': 'Disabled',
    }


def nvlink_status(down=None, speed='53.125'):
    """``nvidia-smi nvlink -s`` of the 8 B200 GPUs in the layout of the captures (tests/fixtures/nvlink): 18 links
    each at the speed of the GB200 capture of NVIDIA/k8s-test-infra#371; ``down``: {index: links printed
    <inactive>, or 'all'}."""
    lines = []
    for index in range(8):
        lines.append('GPU {0}: NVIDIA B200 (UUID: GPU-00000000-0000-0000-0000-00000000000{0})'.format(index))
        gone = (down or {}).get(index, ())
        if gone == 'all':
            lines.append('\t NVML: Unable to retrieve NVLink information as all links are inActive')
            continue
        lines.extend('\t Link {0}: {1}'.format(link, '<inactive>' if link in gone else speed + ' GB/s')
                     for link in range(18))
    return ''.join(line + '\n' for line in lines)


def nvlink_errors(counts=None):
    """``nvidia-smi nvlink -e`` of the 8 B200 GPUs (three counters a link, as the H100 capture of
    tests/fixtures/nvlink prints them); ``counts``: {(index, link, counter): count}."""
    lines = []
    for index in range(8):
        lines.append('GPU {0}: NVIDIA B200 (UUID: GPU-00000000-0000-0000-0000-00000000000{0})'.format(index))
        for link in range(18):
            if link:
                lines.append('')
            lines.extend('\t Link {0}: {1}: {2}'.format(link, name, (counts or {}).get((index, link, name), 0))
                         for name in ('Replay Errors', 'Recovery Errors', 'CRC Errors'))
    return ''.join(line + '\n' for line in lines)


def nvlink(down=None, counts=None):
    """gpu_node_facts' nvidia.nvlink: the raw reads."""
    return {'status': {'rc': 0, 'stdout': nvlink_status(down), 'stderr': '', 'error': None},
            'errors': {'rc': 0, 'stdout': nvlink_errors(counts), 'stderr': '', 'error': None}}


def pci():
    return {
        'gpus': [{'bus_id': bus, 'device_id': '0x2901', 'vendor_id': '0x10de'} for bus in SYSFS_IDS],
        'gpu_count': 8,
        'nvswitches': [{'bus_id': bus, 'device_id': '0x22a3', 'vendor_id': '0x10de'} for bus in SWITCH_IDS],
        'nvswitch_count': 2,
    }


def nic(driver, ipv4, gro, lro_fixed=False, name='System eth', nm_gro='off'):
    """A NIC NetworkManager manages, with its connection as the gather reads it for the nic_offload plan (the
    properties of the features that role persists: nm_connection)."""
    return {
        'mtu': 9000 if driver == 'mlx5_core' else 1500, 'speed_mbps': 400000 if driver == 'mlx5_core' else 1000,
        'addresses': {'ipv4': [ipv4], 'ipv6': []},
        'driver': {'driver': driver, 'version': '6.8', 'firmware_version': '28.43.1014', 'bus_info': ''},
        'features': {'generic-receive-offload': {'enabled': gro, 'fixed': False},
                     'large-receive-offload': {'enabled': False, 'fixed': lro_fixed},
                     'tcp-segmentation-offload': {'enabled': True, 'fixed': False}},
        'nm_managed': True,
        'nm_connection': {'name': name, 'properties': {'ethtool.feature-gro': nm_gro, 'ethtool.feature-lro': 'off'},
                          'error': None},
    }


def gpu_settings_plan(facts, settings, probe=None):
    """The gpu_settings plan of a node on which that role installed its files (the state the probe's unit shows):
    what the readiness checks gpu.power_limit and gpu.clocks read.  ``settings`` may hold the role's variables."""
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_gpu_settings as pg
    from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import test__plan_gpu_settings as T
    given = dict((name, copy.deepcopy(spec['default'])) for name, spec in pg.SETTINGS.items())
    given.update((name, copy.deepcopy(settings[name])) for name in pg.SETTINGS if name in settings)
    gpus = given['nodeprep_gpu_settings_gpus']
    given['nodeprep_gpu_settings_gpus'] = [gpus] if isinstance(gpus, str) else gpus
    services = (probe or {}).get('services') or {}
    unit = services.get(pg.UNIT) or {}
    node = {
        'nodeprep_gathered': ['nvidia'],
        'nvidia': copy.deepcopy(facts.get('nvidia') or {}),
        'nodeprep_units': {pg.PERSISTENCED: {'active': (services.get(pg.PERSISTENCED) or {}).get('active_state')},
                           pg.UNIT: {'active': unit.get('active_state')}},
        'nodeprep_files': dict((path, {'exists': False}) for path in pg.gather(given)['files']),
        'nodeprep_contents': {pg.RECORD: None, pg.BOOT_ID: T.BOOT + '\n'},
    }
    ctx = T.context()
    first = pg.plan(node, given, ctx)
    if not first['problems']:
        node = T.settle(node, first, touch_gpus=False)
        if unit and unit.get('unit_file_state') != 'enabled':
            node['nodeprep_files'][pg.UNIT_LINK] = {'exists': False}
    return _plan.finish(pg.plan(node, given, ctx))


def unlimited():
    return {'memlock': {'soft': 'unlimited', 'hard': 'unlimited'}, 'nofile': {'soft': 1024, 'hard': 524288}}


def _file(content):
    return {'exists': True, 'type': 'file', 'mode': '0644', 'uid': 0, 'gid': 0, 'size': len(content),
            'sha1': _plan.sha1_text(content), 'target': None}


def _dir():
    return {'exists': True, 'type': 'directory', 'mode': '0755', 'uid': 0, 'gid': 0, 'size': 4096, 'sha1': None,
            'target': None}


def _absent():
    return {'exists': False, 'type': None, 'mode': None, 'uid': None, 'gid': None, 'size': None, 'sha1': None,
            'target': None}


MEMLOCK_FILE = '/etc/security/limits.d/90-nodeprep-memlock.conf'
SLURMD_DIR = '/etc/systemd/system/slurmd.service.d'


def memlock_files(written=True, want='unlimited'):
    """The files the memlock role writes with the settings of converged(): as it wrote them, or absent."""
    files = {MEMLOCK_FILE: _plan_memlock.limits_content(['*', 'root'], want), _plan_memlock.SYSTEM_CONF_DIR: None,
             _plan_memlock.MANAGER_DROPIN: _plan_memlock.manager_content(want), SLURMD_DIR: None,
             SLURMD_DIR + '/' + _plan_memlock.DROPIN_NAME: _plan_memlock.service_content(want)}
    if not written:
        return dict((path, _absent()) for path in files)
    return dict((path, _dir() if content is None else _file(content)) for path, content in files.items())


# The rule module of each role whose readiness checks read its plan (_readiness.PLAN_CHECKS).
RULE_MODULES = {'kernel': _plan_kernel, 'memlock': _plan_memlock, 'shm': _plan_shm, 'nccl': _plan_nccl,
                'nic_offload': _plan_nic_offload, 'nvidia_driver': _plan_nvidia_driver, 'rdma': _plan_rdma,
                'dcgm': _plan_dcgm, 'imex': _plan_imex, 'perf_tools': _plan_perf_tools}

# The OS of the node (kernel_state.os, read from /etc/os-release by the gather) and its driver packages as the gather
# reads them (kernel_state.driver_node): NVIDIA's EL9 repository, the driver of nvidia-smi installed.
EL9 = {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '9.6',
       'distribution_major_version': '9', 'architecture': 'x86_64'}


def unit_states(probe, names):
    """gpu_node_facts' ``nodeprep_units`` of ``names`` from the probe's systemctl show states."""
    services = (probe or {}).get('services') or {}
    out = {}
    for name in names:
        name = name if name.endswith('.service') else name + '.service'
        unit = services.get(name) or {}
        active = unit.get('active_state') or 'inactive'
        out[name] = {'load': unit.get('load_state') or 'not-found', 'active': active,
                     'sub': 'running' if active == 'active' else 'dead', 'enabled': unit.get('unit_file_state')}
    return out


def driver_facts(facts, probe, settings):
    """The facts the nvidia_driver plan reads on this node: these facts, the OS and driver packages, the units of
    the probe, the role's files absent."""
    out = copy.deepcopy(facts)
    kernel_state = out.get('kernel_state')
    if isinstance(kernel_state, dict):
        kernel_state.setdefault('os', dict(EL9))
        # The driver's packages at the version nvidia-smi reports, or (nvidia-smi not answering) of the loaded module.
        version = (out.get('nvidia') or {}).get('driver_version') or (kernel_state.get('nvidia_module') or {}).get(
            'version')
        packages = {}
        names = ['nvidia-open', 'kmod-nvidia-open-dkms', 'nvidia-driver', 'nvidia-persistenced']
        fabric = _nvswitch_fabric.nvswitch_fabric(kernel_state)
        if fabric != 'none':
            # NVLink 5 monitors its switches with NVSDM instead of nscq, and runs NVLSM (R22).
            names += ['nvidia-fabricmanager', 'libnvsdm' if fabric == 'nvlink5' else 'libnvidia-nscq']
        if version:
            for name in names:
                packages[name] = [{'epoch': 3, 'version': version, 'release': '1.el9', 'arch': 'x86_64'}]
        if fabric == 'nvlink5':
            for name in ('nvlsm',) + _driver_packages.NVLINK5_PACKAGES:
                packages[name] = [{'epoch': 0, 'version': '2025.06.7', 'release': '1.el9', 'arch': 'x86_64'}]
        # A converged node: its NVIDIA packages locked at exactly their version (the versionlock the role takes).
        locks = ['{0}-3:{1}-1.el9.*'.format(name, version) for name in sorted(packages)
                 if _driver_packages.NVIDIA_STACK_RE.match(name)]
        kernel_state.setdefault('driver_node', {'repos': {}, 'packages': packages, 'versionlock': locks,
                                                'versionlock_plugin': True, 'module_stream': '580-open'})
    request = _plan_nvidia_driver.gather(settings)
    # The units as the gather read them; a probe given (what the tests change) says their state now.
    units = dict(out.get('nodeprep_units') or {})
    if probe is not None or not units:
        units.update(unit_states(probe, request['units']))
    out['nodeprep_units'] = units
    files = dict((path, {'exists': False}) for path in request['files'])
    files.update(out.get('nodeprep_files') or {})
    out['nodeprep_files'] = files
    return out


def plans(facts, settings, probe=None, host='gpu-a01'):
    """The plans the readiness_info action judges with: each planning role's plan from these facts (with the health
    reads of the probe, which the dcgm plan judges), with the settings given (already typed) over the role's
    defaults; gpu_settings' on the node its role settled."""
    out = {}
    if not isinstance(facts, dict) or not isinstance(settings, dict):
        return out
    facts = r.with_probe(facts, probe)
    for role in sorted(set(r.PLAN_CHECKS.values())):
        if role == 'gpu_settings':
            out[role] = gpu_settings_plan(facts, settings, probe)
            continue
        module = RULE_MODULES[role]
        if role == 'nvidia_driver':
            # Typed as the node_plan action types them (a value that does not type is a problem of the plan).
            from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
            typed, problems = _plans.typed_settings(role, dict(
                (name, copy.deepcopy(settings[name])) for name in module.SETTINGS if name in settings))
            out[role] = _plan.plan_with(module, driver_facts(facts, probe, typed), typed, problems,
                                        _plan.new_context(host=host))
            continue
        typed = _plan.defaults(module)
        typed.update((name, copy.deepcopy(settings[name])) for name in module.SETTINGS if name in settings)
        out[role] = _plan.plan_with(module, perf_tools_facts(facts) if role == 'perf_tools' else facts, typed, (),
                                    _plan.new_context(host=host))
    return out


# The packages the perf_tools role installs on the converged EL9 node (CUDA 13.0 of the driver, NCCL 2.27.7).
PERF_PACKAGES = dict([(name, [{'epoch': 0, 'version': '13.0.88', 'release': '1', 'arch': 'x86_64'}])
                      for name in ('cuda-nvcc-13-0', 'cuda-cudart-devel-13-0', 'cuda-driver-devel-13-0',
                                   'cuda-nvml-devel-13-0')]
                     + [(name, [{'epoch': 0, 'version': '2.27.7', 'release': '1+cuda13.0', 'arch': 'x86_64'}])
                        for name in ('libnccl', 'libnccl-devel')]
                     + [(name, [{'epoch': 0, 'version': '1', 'release': '1.el9', 'arch': 'x86_64'}])
                        for name in ('make', 'gcc-c++', 'cmake', 'boost-devel', 'boost-static')])


def perf_tools_facts(facts):
    """The facts the perf_tools plan reads: these, with the role's packages installed where the gather read the
    kernel facts and no package list of its own (the nvidia_driver plan's packages are driver_facts')."""
    out = copy.deepcopy(facts)
    kernel_state = out.get('kernel_state')
    if isinstance(kernel_state, dict) and 'driver_node' not in kernel_state:
        kernel_state['driver_node'] = {'packages': copy.deepcopy(PERF_PACKAGES)}
    return out


def evaluate(facts, settings, probe=None):
    """_readiness.evaluate with the roles' plans made from the same facts and settings."""
    return r.evaluate(facts, settings, probe, plans(facts, settings, probe))


def checked_values(facts, settings, probe=None):
    return r.checked_values(facts, settings, probe, plans(facts, settings, probe))


def topology():
    """gpu_node_facts' nvidia.topology of an 8x B200 HGX node: the real topo -m capture of vllm-project/vllm#24513
    (tests/fixtures/topo, SOURCES.md): every GPU pair at NV18, each GPU with a NIC at PIX."""
    with open(os.path.join(ROOT, 'tests', 'fixtures', 'topo',
                           'b200-8gpu-8nic-nv18_topo-m_vllm-issue24513-excerpt.txt')) as handle:
        return {'matrix': _nvidia_smi_topo.parse_topo_matrix(handle.read()), 'error': None}


def lspci_endpoints():
    """What lspci -D -vvv lists of the node's GPUs and ConnectX (collect/_rdma_state.relevant_devices keeps them):
    endpoints straight under root ports, no switch."""
    return [{'bus_id': bus, 'class': klass, 'port': 'Endpoint', 'secondary': None, 'subordinate': None,
             'acs_ctl': None, 'denied': False}
            for bus, klass in [(b, '3D controller') for b in SYSFS_IDS] + [('0000:8d:00.0', 'Infiniband controller')]]


def dkms_entry(kernel, version='580.105.08'):
    """A dkms status line of EL's kmod-nvidia-open-dkms, as _dkms_status.parse_dkms_status reads it."""
    return {'module': 'nvidia-open', 'version': version, 'kernel': kernel, 'arch': 'x86_64', 'status': 'installed',
            'detail': 'installed'}


def converged():
    """facts, settings, probe of a node site.yml has converged."""
    facts = {
        'nodeprep_gathered': ['nvidia', 'kernel', 'limits', 'shm', 'nic', 'files'],
        # The nic_offload plan's files: the NICs are persisted through NetworkManager (nm_managed), no boot unit.
        'nodeprep_files': {_plan_nic_offload.UNIT_FILE: {'exists': False}, _plan_nic_offload.ENV_DIR: {'exists': False},
                           '/etc/nccl.conf': file_state(NCCL_CONF)},
        'nodeprep_file_patterns': list(_plan_nic_offload.FILE_PATTERNS),
        'nvidia': {'present': True, 'error': None, 'driver_version': '580.105.08', 'cuda_version': '13.0',
                   'attached_gpus': 8, 'gpus': [gpu(i) for i in range(8)], 'topology': topology(),
                   'nvlink': nvlink()},
        'kernel_state': {
            'running': RUNNING, 'installed': [RUNNING], 'default': RUNNING, 'devel': {RUNNING: True},
            'nouveau': {'loaded': False, 'blacklisted': True,
                        'blacklist_files': ['/etc/modprobe.d/nvidia-installer-disable-nouveau.conf']},
            'nvidia_module': {'loaded': True, 'version': '580.105.08', 'flavour': 'open'},
            # kmod-nvidia-open-dkms built the loaded module: dkms status lists it (an empty listing with the package
            # installed is an unknown DKMS state, rules/_dkms.unknown_state).
            'dkms': [dkms_entry(RUNNING)], 'pci': pci(),
            # The OS (from /etc/os-release) and the installed kernel packages the kernel plan reads.
            'os': {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '9.6',
                   'distribution_major_version': '9', 'architecture': 'x86_64'},
            'packages': {'kernel': [RUNNING], 'kernel-core': [RUNNING]},
            # The GPUDirect RDMA path (rules/_rdma.py): one ConnectX function, nvidia_peermem loaded, no IOMMU, no switch.
            'rdma': {'connectx': ['0000:8d:00.0'], 'peermem_loaded': True, 'peer_symbols': None,
                     'cmdline': 'BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{0} root=/dev/nvme0n1p3 ro iommu=pt'.format(RUNNING),
                     'iommu': {'groups': 0, 'class': [], 'device_types': {}}, 'bridges': lspci_endpoints(),
                     'lspci_error': None},
        },
        'limits': {
            'entries': [], 'effective': {'root': unlimited(), 'train': unlimited()}, 'errors': [],
            'systemd': {'default': unlimited(), 'services': {'slurmd': unlimited()}, 'errors': []},
        },
        'shm': {'path': '/dev/shm', 'mounted': True, 'fstype': 'tmpfs', 'size_bytes': 716 * GIB, 'used_bytes': 0,
                'free_bytes': 716 * GIB, 'mount_options': ['rw', 'nosuid', 'nodev', 'size=751619276800'],
                'unlimited': False, 'ram_bytes': 2014 * GIB, 'swap_bytes': 0, 'default_size_bytes': 1007 * GIB,
                'errors': [],
                'fstab': {'options': ['nosuid', 'nodev', 'size=716G'], 'size_bytes': 716 * GIB,
                          'size_explicit': True, 'unlimited': False, 'vfstype': 'tmpfs', 'spec': 'tmpfs',
                          'line': 3}},
        'nics': {'ens3f0np0': nic('mlx5_core', '10.20.0.11/16', False, name='System ens3f0np0'),
                 'eno1': nic('igb', '192.168.1.11/24', True, name='System eno1')},
    }
    settings = role_settings()
    settings.update({
        'nodeprep_expected_gpus': 8,
        'nodeprep_nvidia_driver_branch': '580',
        'nodeprep_gpu_settings_power_limit': '70%',
        'nodeprep_gpu_settings_locked_gpu_clocks': {'min': 1500, 'max': 1965},
        'nodeprep_memlock_verify_users': ['root', 'train'],
        'nodeprep_memlock_services': ['slurmd.service'],
        'nodeprep_shm_size': '716G',
        'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN', 'NCCL_IB_TIMEOUT': 22, 'NCCL_SOCKET_IFNAME': 'ens3f0np0'},
        'nodeprep_nic_offload_networks': ['10.20.0.0/16'],
        'nodeprep_nic_offload_features': {'generic-receive-offload': False, 'large-receive-offload': False},
    })
    active = {'load_state': 'loaded', 'active_state': 'active', 'unit_file_state': 'enabled'}
    probe = {
        'kernel_log': {'source': 'journalctl -k -b 0 (last 20000 lines)', 'lines': [], 'error': None},
        'services': {'nvidia-persistenced.service': dict(active), 'nvidia-fabricmanager.service': dict(active),
                     'nvlsm.service': dict(active), 'nodeprep-gpu-settings.service': dict(active)},
    }
    probe['dcgm'] = dcgm_passing()
    facts['nodeprep_files'].update(memlock_files())
    # The performance gates (opt-in) on, the perf_tools role's tools in place, both gates passing.
    settings.update({'nodeprep_perf_tools_install': True, 'nodeprep_readiness_performance': True,
                     'nodeprep_readiness_performance_thresholds': dict(B200_NVBANDWIDTH)})
    facts['nodeprep_files'].update(perf_tools_files())
    facts['nodeprep_file_patterns'] += [p for p in _plan_perf_tools.gather(dict(
        _plan.defaults(_plan_perf_tools), nodeprep_perf_tools_install=True))['files'] if '*' in p]
    perf = perf_passing()
    facts[r.PERF_WHERE_FACT] = perf['where']
    facts[r.PERF_FACT] = perf['runs']
    # The units the nvidia_driver plan reads, as the gather read them on this node.
    facts['nodeprep_units'] = unit_states(probe, _plan_nvidia_driver.gather(_plan.defaults(_plan_nvidia_driver))['units'])
    return facts, settings, probe


def dcgm_passing():
    """What readiness_info ran for gpu.dcgm_diag on a node whose DCGM diagnostic passed: the 8-GPU test object of
    NVIDIA/DCGM issue #215 (tests/fixtures/dcgmi, a real DCGM 4.x excerpt) in the envelope of the 4.x schema; DCGM's
    discovery not read."""
    fixtures = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '..', '..', '..', 'fixtures', 'dcgmi')
    with open(os.path.join(fixtures, 'h100-8gpu-dcgm4-diag-diagnostic-test-excerpt_dcgm-issue215.txt')) as f:
        excerpt = f.read().rstrip().rstrip(',')
    doc = ('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [' + excerpt + ']}]}, '
           '"metadata": {"version": "4.1.1"}}')
    return {'enabled': True, 'level': 1, 'timeout': 300, 'dcgmi': '/usr/bin/dcgmi',
            'diag': {'rc': 0, 'stdout': doc, 'stderr': '', 'timed_out': False}}


# What the nccl role writes for converged()'s settings (the plan compares its SHA-1 with the gathered one).
NCCL_CONF = 'NCCL_DEBUG=WARN\nNCCL_IB_TIMEOUT=22\nNCCL_SOCKET_IFNAME=ens3f0np0\n'


def file_state(text, mode='0644'):
    """A gathered file record (gpu_node_facts' nodeprep_files entry) of a file holding ``text`` (str or bytes)."""
    raw = text if isinstance(text, bytes) else text.encode('utf-8')
    return {'exists': True, 'type': 'file', 'mode': mode, 'uid': 0, 'gid': 0, 'size': len(raw),
            'sha1': hashlib.sha1(raw).hexdigest(), 'target': None}  # nosec B324 - what gpu_node_facts reports


MISSING_FILE = {'exists': False, 'type': None, 'mode': None, 'uid': None, 'gid': None, 'size': None, 'sha1': None,
                'target': None}


def fresh():
    """facts, settings, probe of the same node as delivered: distro kernel without devel, nouveau, no driver."""
    facts, settings, probe = converged()
    facts = copy.deepcopy(facts)
    facts['nvidia'] = {'present': False, 'error': 'nvidia-smi not found', 'driver_version': None,
                       'cuda_version': None, 'attached_gpus': 0, 'gpus': []}
    ks = facts['kernel_state']
    ks['devel'] = {RUNNING: False}
    ks['nouveau'] = {'loaded': True, 'blacklisted': False, 'blacklist_files': []}
    ks['nvidia_module'] = {'loaded': False, 'version': None, 'flavour': None}
    # As delivered: the inbox RDMA stack, ACS on at the switch port above GPU 0 (firmware default), IOMMU translating.
    ks['rdma'] = dict(ks['rdma'], peermem_loaded=False, peer_symbols=[], cmdline='BOOT_IMAGE=(hd0,gpt2)/vmlinuz ro',
                      iommu={'groups': 120, 'class': ['dmar0'], 'device_types': {SYSFS_IDS[0]: 'DMA-FQ'}},
                      bridges=lspci_endpoints() + [{
                          'bus_id': '0000:8e:01.0', 'class': 'PCI bridge', 'port': 'Downstream Port',
                          'secondary': 0x8f, 'subordinate': 0x8f, 'denied': False,
                          'acs_ctl': {'SrcValid': True, 'TransBlk': False, 'ReqRedir': True, 'CmpltRedir': True,
                                      'UpstreamFwd': True, 'EgressCtrl': False, 'DirectTrans': False}}])
    eight_mib = {'soft': 8192, 'hard': 8192}
    facts['limits'] = {'entries': [], 'effective': {'root': {'memlock': eight_mib}, 'train': {'memlock': eight_mib}},
                       'errors': [],
                       'systemd': {'default': {'memlock': eight_mib}, 'services': {'slurmd': {'memlock': eight_mib}},
                                   'errors': []}}
    facts['nodeprep_files'].update(memlock_files(written=False))
    facts['shm'].update(size_bytes=1007 * GIB, free_bytes=1007 * GIB, fstab=None)
    facts['nics']['ens3f0np0']['features']['generic-receive-offload']['enabled'] = True
    # NetworkManager's connection as installed: no ethtool property set.
    facts['nics']['ens3f0np0']['nm_connection']['properties'] = {'ethtool.feature-gro': '', 'ethtool.feature-lro': ''}
    missing = {'load_state': 'not-found', 'active_state': 'inactive', 'unit_file_state': None}
    facts['nodeprep_files']['/etc/nccl.conf'] = dict(MISSING_FILE)
    # No performance tool yet; and with no GPU listed by nvidia-smi the gather runs neither.
    facts['nodeprep_files'].update((path, dict(MISSING_FILE)) for path, state in perf_tools_files().items())
    for run in facts[r.PERF_FACT].values():
        run.update(rc=None, stdout='', stderr='not run: nvidia-smi listed no GPU')
    probe = {
        'kernel_log': {'source': 'journalctl -k -b 0 (last 20000 lines)', 'lines': [], 'error': None},
        'services': dict((name, dict(missing)) for name in probe['services']),
    }
    return facts, settings, probe


# ---------------------------------------------------------------------------------------------------------------------
# the performance gates: what the gather ran on a node with no job (rules/_perf_gates.py)

def allreduce_output(gpus, busbw, wrong=0, host='gpu-a01', product='NVIDIA B200', bus_ids=None):
    """all_reduce_perf -b 1G -e 16G -f 2 -g <gpus> -c 1 as nccl-tests 2.17.9 prints it: the layout of the real capture
    tests/fixtures/nccl-tests/gh200-16gpu-4node-nccl-tests-2.17.9_all_reduce_perf-wrong_sigma2-olivia.txt (header,
    rank lines, the two-line column title, the summary lines of the a3mega capture), with ``busbw`` GB/s at every
    size and ``wrong`` wrong elements in the 16 GiB in-place row (test_readiness.py checks the layout against the
    captures through the parser)."""
    bus_ids = bus_ids or [b[4:-2].lower() for b in BUS_IDS]
    lines = ['# nccl-tests version 2.17.9 nccl-headers=22707 nccl-library=22707',
             '# Collective test starting: all_reduce_perf',
             '# nThread 1 nGpus {0} minBytes 1073741824 maxBytes 17179869184 step: 2(factor) warmup iters: 1 iters: '
             '20 agg iters: 1 validation: 1 graph: 0'.format(gpus), '#', '# Using devices']
    for rank in range(gpus):
        lines.append('#  Rank {0:2d} Group  0 Pid  41230 on {1:>10} device {0:2d} [0000:{2}] {3}'.format(
            rank, host, bus_ids[rank % len(bus_ids)], product))
    lines += ['#',
              '#                                                              out-of-place                       '
              'in-place          ',
              '#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw '
              '  busbw  #wrong ',
              '#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s) '
              ' (GB/s)         ']
    factor = 2.0 * (gpus - 1) / gpus
    size = GIB
    while size <= 16 * GIB:
        algbw = busbw / factor
        time_us = size / algbw / 1e3
        lines.append('{0:12d}  {1:12d}  {2:>8}  {3:>6}  {4:>6}  {5:7.0f}  {6:6.2f}  {7:6.2f}  {8:6d}  {5:7.0f}  {6:6.2f}  '
                     '{7:6.2f}  {9:6d}'.format(size, size // 4, 'float', 'sum', -1, time_us, algbw, busbw, 0,
                                               wrong if size == 16 * GIB else 0))
        size *= 2
    lines += ['# Out of bounds values : 0 OK', '# Avg bus bandwidth    : {0:g} '.format(busbw), '#',
              '# Collective test concluded: all_reduce_perf', '']
    return '\n'.join(lines)


def nvbandwidth_output(gpus, h2d, d2h, d2d, product='NVIDIA B200'):
    """nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce as v0.8
    prints it: the layout of the real captures of tests/fixtures/nvbandwidth (the Azure H100 d2d matrix, the README's
    host-to-device row), ``h2d``/``d2h`` GB/s per GPU (a number or a list), ``d2d`` per pair."""
    def per_gpu(value):
        return list(value) if isinstance(value, (list, tuple)) else [value] * gpus

    def row(label, cells):
        shown = ['N/A' if v is None else '{0:.2f}'.format(v) for v in cells]
        return '{0:>2}'.format(label) + ''.join('{0:>10}'.format(cell) for cell in shown)

    head = '  ' + ''.join('{0:>10}'.format(n) for n in range(gpus))
    lines = ['nvbandwidth Version: v0.8', 'Built from Git version: ', '', 'CUDA Runtime Version: 13000',
             'CUDA Driver Version: 13000', 'Driver Version: 580.105.08', '', 'gpu-a01']
    lines += ['Device {0}: {1} ({2})'.format(n, product, b[4:-2].lower()) for n, b in enumerate(BUS_IDS[:gpus])]
    lines.append('')
    for name, words, values in (('host_to_device_memcpy_ce', 'CPU(row) -> GPU(column)', per_gpu(h2d)),
                                ('device_to_host_memcpy_ce', 'CPU(row) <- GPU(column)', per_gpu(d2h))):
        lines += ['Running {0}.'.format(name), 'memcpy CE {0} bandwidth (GB/s)'.format(words), head, row(0, values),
                  '', 'SUM {0} {1:.2f}'.format(name, sum(values)), '']
    matrix = [[None if a == b else d2d for b in range(gpus)] for a in range(gpus)]
    lines += ['Running device_to_device_memcpy_read_ce.', 'memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)', head]
    lines += [row(n, cells) for n, cells in enumerate(matrix)]
    lines += ['', 'SUM device_to_device_memcpy_read_ce {0:.2f}'.format(d2d * gpus * (gpus - 1)), '',
              'NOTE: The reported results may not reflect the full capabilities of the platform.',
              'Performance can vary with software drivers, hardware clocks, and system topology.', '']
    return '\n'.join(lines)


def perf_run(tool, stdout, rc=0, stderr=''):
    """One tool's record as collect/_health.read_perf returns it."""
    paths = {'all_reduce_perf': '/opt/nodeprep/perf/bin/all_reduce_perf', 'nvbandwidth': '/opt/nodeprep/perf/bin/nvbandwidth'}
    return {'path': paths[tool], 'argv': [paths[tool]], 'rc': rc, 'stdout': stdout, 'stderr': stderr,
            'timed_out': False, 'timeout': 600, 'seconds': 41.2}


# The converged B200 node's gates: 820 GB/s all-reduce bus bandwidth (the double's B200 figure; OCI's gate is 440),
# 55 GB/s host<->device, 750 GB/s device-to-device read per pair.
B200_NVBANDWIDTH = {'host_to_device_gbps': 48, 'device_to_host_gbps': 48, 'device_to_device_read_gbps': 600}


def perf_passing():
    """The facts of the performance gates on the converged node: the controller let them run (drained in Slurm) and
    both tools printed passing figures."""
    return {'where': {'run': True, 'why': 'Slurm: drained, no job (State=IDLE+DRAIN, reason nodeprep:20250602T101112:verify)'},
            'runs': {'all_reduce_perf': perf_run('all_reduce_perf', allreduce_output(8, 820.0)),
                     'nvbandwidth': perf_run('nvbandwidth', nvbandwidth_output(8, 55.0, 55.5, 750.0))}}


def perf_tools_files():
    """The perf_tools role's paths on the converged node: folders, builds and links in place."""
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_perf_tools as P
    settings = _plan.defaults(P)
    settings.update({'nodeprep_perf_tools_install': True})
    out = {}
    for path in P.gather(settings)['files']:
        out[path] = {'exists': False}
    prefix = settings['nodeprep_perf_tools_prefix']
    for path in (prefix, prefix + '/src', prefix + '/build', prefix + '/bin'):
        out[path] = {'exists': True, 'type': 'directory', 'mode': '0755', 'uid': 0, 'gid': 0}
    for tool in P.TOOLS:
        binary = P.build_dir(settings, tool, (13, 0), '2.27.7-1+cuda13.0') + '/' + tool
        out[binary] = {'exists': True, 'type': 'file', 'mode': '0755', 'uid': 0, 'gid': 0}
        out[P.binaries(settings)[tool]] = {'exists': True, 'type': 'link', 'target': binary, 'uid': 0, 'gid': 0}
    return out
