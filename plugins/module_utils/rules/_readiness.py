# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# It may change or disappear in any release without notice; do not import it
# from other collections or from playbooks.
#
# Fleet readiness: the judgement, made on the controller (the readiness_info action) from what the node returned in
# one gather (gpu_node_facts).  Pure functions, no Ansible import.
#
# * CHECKS is the one list of (id, remedy, check function, fact namespaces it needs); CHECK_IDS and REMEDIES are
#   derived from it.  A check is either a role's (PLAN_CHECKS: it passes exactly when that role's plan, made from the
#   same facts, has no drift for it; plan_check) or a rule of its own here (a function of the facts and the readiness
#   settings: health the roles do not decide, such as gpu.count or gpu.health).  docs/development.md, "Adding a
#   readiness check", is the recipe.
# * evaluate(facts, settings, probe=None, plans=None) turns the gathered facts (namespaces nvidia, kernel_state,
#   limits, shm, nics, nodeprep_errors, and the health reads nodeprep_kernel_log and nodeprep_dcgm; see
#   docs/contracts.md) and the roles' plans into a list of checks {id, status, expected, observed, remedy}.  The
#   settings are the readiness role's own, typed once (SETTING_NAMES).  A fact that could not be read fails the
#   checks that need it; it never turns them into skip or pass.
# * judge(facts, settings, plans) is what the readiness_info action returns per host: checks, summary, ready,
#   lost_gpus and values (checked_values: what the checks looked at, for the report).
# * find_lost_gpus(facts) lists GPUs the PCI bus shows but nvidia-smi does not.
#
# The rules shared with the roles live in their own files: NIC selection and the ethtool name mapping in
# parsers/_nic_selection.py and parsers/_ethtool_names.py. The report renderers (JSON, JUnit, HTML, text) run on the
# controller too: plugins/plugin_utils/_readiness_report.py.
#
# Python 3.6 compatible, as every module_utils file.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _nvswitch_fabric as driver_rules
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_fabric
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_health
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _perf_gates
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rdma as rdma_rules
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _shm as shm_rules
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _topology


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

# The settings the checks of this file read, typed once by the readiness_info action: the readiness role's own
# (plugins/plugin_utils/_readiness_settings.py SETTINGS) and the collection-wide nodeprep_expected_gpus (typed with
# the nvidia_driver role's SETTINGS).  evaluate() refuses a settings dict that lacks one.  No default lives here.  The
# roles' own variables reach their checks through their plans only.
SETTING_NAMES = (
    'nodeprep_expected_gpus',
    'nodeprep_readiness_xid_fail',
    'nodeprep_readiness_skip_checks',
    'nodeprep_readiness_kernel_log_lines',
    'nodeprep_readiness_thresholds',
    'nodeprep_readiness_mig',
    'nodeprep_readiness_performance',
    'nodeprep_readiness_node_idle',
    'nodeprep_readiness_performance_thresholds',
    'nodeprep_readiness_performance_timeout',
)

# The facts of the performance gates (_perf_gates.py): what the gather ran, and where the controller let them run.
PERF_FACT = _perf_gates.FACT
PERF_WHERE_FACT = _perf_gates.WHERE_FACT

# Only named in messages (no file is opened here); the shm facts say where they looked.
SHM_PATH = '/dev/shm'  # nosec B108

_XID_RE = re.compile(r'NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): ([0-9]+)(?:, (.*))?$')
_BUS_RE = re.compile(r'^(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})(?:\.([0-7]))?$')
_PAGE = 4096


# ---------------------------------------------------------------------------
# small helpers


def _nvsmi_failed(nvidia):
    """nvidia-smi gave nothing usable. Partial output (exit 15 after printing the GPUs it could read: a lost GPU) is
    not a failure of nvidia-smi: the printed GPUs count, and the lost one shows as missing against the PCI bus."""
    return not nvidia.get('present') or bool(nvidia.get('error') and not nvidia.get('partial'))


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


format_size = shm_rules.format_size


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
    """A setting by name; evaluate() has made sure every name of SETTING_NAMES is there."""
    return settings[name]


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


# ---------------------------------------------------------------------------
# the checks, one function each: (facts, settings) -> (status, expected, observed); a function beside a plan check
# (PLAN_CHECKS) returns the failures no role decides instead (a list of sentences; with_health adds them)


def _driver_answers(facts, settings):
    """driver.loaded beyond the nvidia_driver plan: whether nvidia-smi answered (driver health as observed; the
    wanted version, the loaded module and its match with the installed driver are the plan's drift)."""
    nvidia = facts.get('nvidia') or {}
    if _get(facts, 'kernel_state', 'pci', 'gpu_count') == 0 and not _gpus(facts):
        return []
    if _nvsmi_failed(nvidia):
        return ['nvidia-smi failed: {0}'.format(nvidia.get('error') or 'not found')]
    return []


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
    if _nvsmi_failed(nvidia):
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


def _gpu_count(facts, settings):
    expected_gpus = _as_int(_setting(settings, 'nodeprep_expected_gpus'), 'nodeprep_expected_gpus')
    pci_count = _get(facts, 'kernel_state', 'pci', 'gpu_count')
    nvidia = facts.get('nvidia') or {}
    nvsmi_count = len(_gpus(facts))
    if expected_gpus:
        expected = '{0} GPUs in nvidia-smi and on the PCI bus (nodeprep_expected_gpus)'.format(expected_gpus)
    else:
        expected = 'nvidia-smi lists every GPU the PCI bus shows'
    if pci_count is None and not nvidia:
        return (SKIP, expected, 'neither kernel nor nvidia facts were gathered')
    observed = 'nvidia-smi: {0}, PCI bus: {1}'.format(
        nvsmi_count if not _nvsmi_failed(nvidia) else 'failed', pci_count)
    problems = []
    nvsmi_failed = _nvsmi_failed(nvidia)
    if nvidia and nvsmi_failed and pci_count is None:
        # Neither source can say how many GPUs there are: that is not a pass.
        problems.append('nvidia-smi failed ({0}) and the PCI bus was not read, so no GPU could be '
                        'counted'.format(nvidia.get('error') or 'not found'))
    lost = find_lost_gpus(facts)
    if lost:
        problems.append('missing from nvidia-smi: {0}'.format(', '.join(item['bus_id'] for item in lost)))
    if expected_gpus and pci_count is not None and pci_count < expected_gpus:
        problems.append('the PCI bus shows {0} of {1} GPUs'.format(pci_count, expected_gpus))
    if problems:
        return (FAIL, expected, observed + '; ' + '; '.join(problems))
    if expected_gpus and nvsmi_count != expected_gpus:
        return (WARN, expected, observed + '; more GPUs than nodeprep_expected_gpus')
    if pci_count == 0 and nvsmi_count == 0 and not expected_gpus:
        return (SKIP, expected, 'no NVIDIA GPU on the PCI bus')
    return (PASS, expected, observed)


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


# What the gather's kernel_log subset holds when nodeprep_readiness_kernel_log_lines is 0 (the log is not read).
KERNEL_LOG_OFF = {'source': None, 'lines': None, 'error': 'not read (kernel_log_lines is 0)'}


def kernel_log_read(facts, settings):
    """The gather's Xid read of the kernel log (``nodeprep_kernel_log``: {source, lines, error}); the record of a log
    not read when nodeprep_readiness_kernel_log_lines is 0; None when the facts hold no kernel log read at all."""
    found = facts.get('nodeprep_kernel_log')
    if isinstance(found, dict):
        return found
    if settings.get('nodeprep_readiness_kernel_log_lines') == 0:
        return dict(KERNEL_LOG_OFF)
    return None


def _health(facts, settings):
    # Remapped rows are gpu.remapped_rows' (_gpu_health.remapped_rows).
    expected = ('no pending page retirement, no uncorrectable ECC error, '
                'no Xid event in the kernel log of this boot')
    gpus = _gpus(facts)
    if not gpus:
        return (SKIP, expected, 'nvidia-smi lists no GPU')
    fail_codes = set(int(x) for x in _as_list(_setting(settings, 'nodeprep_readiness_xid_fail'),
                                              'nodeprep_readiness_xid_fail'))
    problems = []
    warnings = []
    for gpu in gpus:
        label = _gpu_label(gpu)
        pages = gpu.get('retired_pages') or {}
        ecc = gpu.get('ecc') or {}
        if pages.get('pending'):
            problems.append('{0}: page retirement pending (reset needed)'.format(label))
        if ecc.get('volatile_uncorrectable'):
            problems.append('{0}: {1} uncorrectable ECC errors since the driver loaded'.format(
                label, ecc['volatile_uncorrectable']))
        elif ecc.get('aggregate_uncorrectable'):
            warnings.append('{0}: {1} uncorrectable ECC errors in its lifetime'.format(
                label, ecc['aggregate_uncorrectable']))
    kernel_log = kernel_log_read(facts, settings)
    xid_lines = _get(kernel_log, 'lines')
    events = parse_xid_lines(xid_lines)
    by_code = {}
    for event in events:
        by_code.setdefault((event['xid'], event['bus_id']), []).append(event)
    for (xid, bus), found in sorted(by_code.items()):
        text = 'Xid {0} on {1} x{2}: {3}'.format(xid, bus, len(found), found[-1]['text'] or found[-1]['line'])
        (problems if xid in fail_codes else warnings).append(text)
    log_note = ''
    if kernel_log is not None and xid_lines is None:
        log_note = 'kernel log not read: {0}'.format(_get(kernel_log, 'error') or 'unknown reason')
        warnings.append(log_note)
    if problems:
        return (FAIL, expected, '; '.join(problems + warnings))
    if warnings:
        return (WARN, expected, '; '.join(warnings))
    source = _get(kernel_log, 'source')
    observed = 'all {0} GPUs healthy'.format(len(gpus))
    if source:
        observed += '; no Xid in {0}'.format(source)
    return (PASS, expected, observed)


def gpu_memory_bytes(facts):
    """The node's total GPU memory in bytes, as nvidia-smi reports it."""
    return shm_rules.gpu_memory_bytes(g.get('memory_total_mib') for g in _gpus(facts))


def nvidia_unreadable(facts):
    """Why nvidia-smi could not be read on a node that has GPUs; None when it was read or there is no GPU."""
    nvidia = facts.get('nvidia')
    if not isinstance(nvidia, dict):
        return None
    if not _nvsmi_failed(nvidia):
        return None
    if _get(facts, 'kernel_state', 'pci', 'gpu_count') == 0:
        return None
    return 'nvidia-smi failed: {0}'.format(nvidia.get('error') or 'not found')


def fabric_kind(facts):
    """How the node's GPUs reach their NVSwitches: ``none``, ``pci`` (NVSwitches on the PCI bus, HGX H100/H200),
    ``nvlink5`` (HGX B200 and later: the NVSwitches are not on the PCI bus; kernel_facts finds their NVLink 5
    bridges); None when the kernel facts were not read.  The nvidia_driver role's own rule
    (_driver_plan.nvswitch_fabric, with its fallbacks for facts that lack ``pci.nvswitch_fabric``).
    """
    kernel_state = _get(facts, 'kernel_state')
    if not isinstance(kernel_state, dict) or not isinstance(kernel_state.get('pci'), dict):
        return None
    return driver_rules.nvswitch_fabric(kernel_state)


def _fabric_check(facts, settings):
    """gpu.fabric: the GPUs' fabric state as nvidia-smi reports it (the rule: _gpu_fabric.check). The fabric manager
    service itself is fabric.manager's (the nvidia_driver plan)."""
    return _gpu_fabric.check(_gpus(facts))


def _topology_check(facts, settings):
    """gpu.topology: NVLinks per GPU pair and the GPUs' NIC rails from nvidia-smi topo -m (the rule:
    _topology.from_facts; NVSwitches from the kernel facts' fabric kind or the GPUs' NVLink domain)."""
    return _topology.from_facts(facts.get('nvidia'), fabric_kind(facts))


# The GPUDirect RDMA rules (_rdma.py); rdma.peer_memory and pci.acs are the rdma plan's (PLAN_CHECKS).  kernel.iommu
# reads the node the same way; it is judged here until the kernel plan owns it (the kernel role sets iommu=pt).


def _gpu_bus_ids(facts):
    return [dev.get('bus_id') for dev in _get(facts, 'kernel_state', 'pci', 'gpus') or []]


def _kernel_iommu(facts, settings):
    return rdma_rules.iommu_result(_get(facts, 'kernel_state', 'rdma'), _gpu_bus_ids(facts))


# The performance gates (_perf_gates.py; opt-in, only on a node that runs no job): the rules judge the raw outputs the
# gather returned.  They need no namespace (CHECKS): a gate that is off skips even where nvidia-smi failed; one that
# ran judges nvidia-smi's GPU list itself (none listed: nothing ran, and it fails saying so).


def _allreduce(facts, settings):
    return _perf_gates.judge_allreduce(facts, settings)


def _nvbandwidth(facts, settings):
    return _perf_gates.judge_nvbandwidth(facts, settings)


_ROLE = 'role gpufleet.nodeprep.{0} (playbooks/{0}.yml)'

# The one list of checks: (id, remedy, check function, fact namespaces it needs). A namespace that could not be
# read (ansible_facts.nodeprep_errors, or nvidia-smi failing on a node with GPUs) fails the checks that need it
# unless their settings leave that part of the node alone. A check of PLAN_CHECKS has no function here: its role's
# plan decides it (plan_check).
CHECKS = (
    # Judged by the kernel plan (PLAN_CHECKS): the devel/headers tree of the kernel that must boot next.
    ('kernel.devel_matched', _ROLE.format('kernel'), None, ('kernel_state',)),
    # Judged by the nvidia_driver plan (PLAN_CHECKS); driver.loaded adds what no role decides (whether nvidia-smi
    # answered): its function here returns those failures. The GPUs' fabric state is gpu.fabric's, not fabric.manager's.
    ('driver.nouveau_blacklisted', _ROLE.format('nvidia_driver'), None, ('kernel_state',)),
    ('driver.loaded', _ROLE.format('nvidia_driver'), _driver_answers, ('nvidia', 'kernel_state')),
    ('driver.open_modules', _ROLE.format('nvidia_driver'), None, ('kernel_state',)),
    ('driver.persistenced', _ROLE.format('nvidia_driver'), None, ('kernel_state',)),
    ('gpu.count', 'playbooks/recover_gpu.yml (GPU missing from nvidia-smi); a GPU missing from the PCI bus as '
                  'well needs a reboot and then hardware service', _gpu_count, ('nvidia', 'kernel_state')),
    # Judged by the gpu_settings plan (PLAN_CHECKS): no function here.
    ('gpu.power_limit', _ROLE.format('gpu_settings'), None, ('nvidia',)),
    ('gpu.clocks', _ROLE.format('gpu_settings'), None, ('nvidia',)),
    ('gpu.health', 'drain the node, then playbooks/recover_gpu.yml (reboot resets the GPU and applies pending '
                   'page retirement or row remapping); repeated faults: hardware service', _health, ('nvidia',)),
    # GPU health that slows or breaks a job (_gpu_health.py; thresholds and sources in _fitness_thresholds.py).
    ('gpu.throttle', 'drain the node; HW Power Brake: the power supply or BMC; thermal: cooling and airflow, then '
                     'hardware service', _gpu_health.throttle, ('nvidia',)),
    ('pci.link', 'drain the node, then playbooks/recover_gpu.yml (a reboot retrains the link); still narrow: reseat '
                 'or hardware service (riser, slot, retimer)', _gpu_health.pcie_link, ('nvidia',)),
    ('nvlink.links', 'drain the node, then playbooks/recover_gpu.yml (a reboot retrains NVLinks); links still down or '
                     'errors growing: hardware service (baseboard/NVLink)', _gpu_health.nvlinks, ('nvidia',)),
    ('gpu.remapped_rows', 'pending: drain the node, then playbooks/recover_gpu.yml (a GPU reset applies the remap); '
                          'failure or too many rows: replace the GPU', _gpu_health.remapped_rows, ('nvidia',)),
    ('gpu.mig', 'nvidia-smi -mig 0 (or 1, as nodeprep_readiness_mig wants) on a drained node, then a GPU reset '
                '(playbooks/recover_gpu.yml)', _gpu_health.mig, ('nvidia',)),
    ('gpu.vbios', 'plan a VBIOS update of the GPUs behind (the vendor\'s firmware bundle) on a drained node',
     _gpu_health.vbios, ('nvidia',)),
    ('memlock.users', _ROLE.format('memlock'), None, ('limits',)),
    ('memlock.services', _ROLE.format('memlock'), None, ('limits',)),
    ('shm.size', _ROLE.format('shm'), None, ('shm',)),
    ('nccl.config', _ROLE.format('nccl'), None, ()),
    ('nic.offload', _ROLE.format('nic_offload'), None, ('nics',)),
    ('fabric.manager', _ROLE.format('nvidia_driver'), None, ('kernel_state',)),
    # What the GPUs report (_gpu_fabric.py, _topology.py); on by default, skipped where they cannot apply.
    ('gpu.fabric', 'HGX: ' + _ROLE.format('nvidia_driver') + ' (fabric manager), then playbooks/recover_gpu.yml; '
                   'GB200/GB300 trays: the NVLink switch trays must register the GPUs (NVLink domain manager, IMEX); '
                   'still not Completed: hardware service', _fabric_check, ('nvidia',)),
    ('gpu.topology', 'drain the node, then playbooks/recover_gpu.yml (a reboot retrains NVLinks); links still down: '
                     'hardware service (baseboard/NVLink); a GPU without a NIC rail: the NIC slot layout',
     _topology_check, ('nvidia',)),
    # Judged by the dcgm plan (PLAN_CHECKS): the role's work, then DCGM's diagnostic (opt-in: nodeprep_readiness_dcgm),
    # which the readiness gather ran (nodeprep_dcgm).
    ('gpu.dcgm_diag', 'drain the node and give the GPU and test named to hardware service; persistence mode off: '
                      'role gpufleet.nodeprep.nvidia_driver (nodeprep_nvidia_driver_persistenced); DCGM missing or '
                      'its host engine stopped: role gpufleet.nodeprep.dcgm', None, ()),
    # Judged by the rdma plan (PLAN_CHECKS): the GPUDirect RDMA path (_rdma.py), on a node with ConnectX devices.
    ('rdma.peer_memory', 'role gpufleet.nodeprep.rdma with nodeprep_rdma_peermem: true (loads nvidia_peermem), or '
                         'nodeprep_rdma_path: dmabuf where DMA-BUF serves', None, ('kernel_state',)),
    ('pci.acs', 'disable ACS in the BIOS (the real fix), or role gpufleet.nodeprep.rdma with '
                'nodeprep_rdma_acs_unit: true (clears it at every boot with setpci)', None, ('kernel_state',)),
    ('kernel.iommu', 'role gpufleet.nodeprep.kernel with nodeprep_kernel_iommu_passthrough: true (iommu=pt), then a '
                     'reboot', _kernel_iommu, ('kernel_state',)),
    # Judged by the imex plan (PLAN_CHECKS): the IMEX domain of a multi-node NVLink node (opt-in; skips elsewhere).
    ('imex.domain', _ROLE.format('imex') + '; a peer named down: its nvidia-imex, its node or the management network '
     'between them', None, ('imex',)),
    # Judged by the perf_tools plan (PLAN_CHECKS): the tools the performance gates run, where the role installs them.
    ('perf.tools', _ROLE.format('perf_tools') + ' (nodeprep_perf_tools_install: true)', None, ()),
    # The performance gates (opt-in: nodeprep_readiness_performance; only on a node that runs no job).
    ('perf.allreduce', 'drain the node; gpu.topology and gpu.fabric name a link or GPU that is down, else '
                       'playbooks/recover_gpu.yml (a reset retrains NVLinks) and run the gate again; still slow: '
                       'hardware service (baseboard/NVLink); a wrong value: hardware service for the GPU',
     _allreduce, ()),
    ('perf.nvbandwidth', 'drain the node; a GPU slow host<->device: reseat or service its PCIe path (the link width '
                         'and generation under load); slow device<->device: as perf.allreduce',
     _nvbandwidth, ()),
)
CHECK_IDS = tuple(entry[0] for entry in CHECKS)
# The checks of the GPU roles (_gpu_node.GPU_ROLES) and of the GPUs themselves: on a node that is not a GPU node
# (no NVIDIA GPU on the PCI bus, or nodeprep_gpu_node false; the decision its GPU roles' plans record) they skip
# with that reason, so such a node is never "not ready" for GPU reasons.
GPU_CHECKS = tuple(check_id for check_id in CHECK_IDS
                   if check_id.split('.')[0] in ('kernel', 'driver', 'gpu', 'nccl', 'fabric', 'rdma', 'pci',
                                                 'nvlink', 'perf'))
REMEDIES = dict((entry[0], entry[1]) for entry in CHECKS)
# The fact namespaces each check needs (what the readiness gather reads for it).
NEEDS = dict((entry[0], entry[3]) for entry in CHECKS)

# gpu_node_facts' subsets and the namespaces they fill.
_SUBSET_NAMESPACES = {'nvidia': 'nvidia', 'kernel': 'kernel_state', 'limits': 'limits', 'shm': 'shm',
                      'nic': 'nics'}


def normalize_settings(settings):
    """A copy of ``settings`` with every name of SETTING_NAMES checked and typed; ReadinessError otherwise."""
    if not isinstance(settings, dict):
        raise ReadinessError('settings: expected a dict of role variables, got {0}'.format(type(settings).__name__))
    missing = [name for name in SETTING_NAMES if name not in settings]
    if missing:
        raise ReadinessError('settings: missing {0}; give every variable the checks read (the readiness role '
                             'passes them all; docs/readiness.md lists them)'.format(', '.join(missing)))
    out = dict(settings)
    codes = []
    for code in _as_list(out['nodeprep_readiness_xid_fail'], 'nodeprep_readiness_xid_fail'):
        if isinstance(code, bool):
            code = None
        try:
            codes.append(int(code))
        except (TypeError, ValueError):
            raise ReadinessError('nodeprep_readiness_xid_fail: {0!r} is not an Xid code (a whole number)'.format(
                code))
    out['nodeprep_readiness_xid_fail'] = codes
    health = _gpu_health.settings_problems(out)
    if health:
        raise ReadinessError('; '.join(health))
    return out


def gather_errors(facts):
    """Namespace -> why it could not be read: gpu_node_facts' ``nodeprep_errors`` and a failed nvidia-smi."""
    raw = facts.get('nodeprep_errors') or {}
    if not isinstance(raw, dict):
        raise ReadinessError('facts.nodeprep_errors: expected a dict subset -> message, got {0!r}'.format(raw))
    errors = {}
    for subset, message in raw.items():
        errors[_SUBSET_NAMESPACES.get(str(subset), str(subset))] = str(message)
    for namespace in ('kernel_state', 'limits', 'shm', 'nics'):
        value = facts.get(namespace)
        if isinstance(value, dict) and isinstance(value.get('error'), str) and value['error']:
            errors.setdefault(namespace, '{0} facts: {1}'.format(namespace, value['error']))
    unread = nvidia_unreadable(facts)
    if unread and 'nvidia' not in errors:
        errors['nvidia'] = unread
    elif 'nvidia' in errors and _get(facts, 'kernel_state', 'pci', 'gpu_count') == 0:
        del errors['nvidia']
    return errors


def _unread(facts, namespace):
    return gather_errors(facts).get(namespace)


# The checks whose verdict is a role's plan (plugins/module_utils/plans/_plan_<role>.py CHECKS, made on the controller
# from the same gather by the readiness_info action): the check passes exactly when that plan has no drift for it.
# Their settings are the role's own, typed once by the action; none of them is in SETTING_NAMES.
PLAN_CHECKS = {'kernel.devel_matched': 'kernel',
               'gpu.power_limit': 'gpu_settings', 'gpu.clocks': 'gpu_settings', 'memlock.users': 'memlock',
               'memlock.services': 'memlock', 'shm.size': 'shm', 'nccl.config': 'nccl', 'nic.offload': 'nic_offload',
               'driver.nouveau_blacklisted': 'nvidia_driver', 'driver.loaded': 'nvidia_driver',
               'driver.open_modules': 'nvidia_driver', 'driver.persistenced': 'nvidia_driver',
               'fabric.manager': 'nvidia_driver', 'gpu.dcgm_diag': 'dcgm', 'rdma.peer_memory': 'rdma',
               'pci.acs': 'rdma', 'imex.domain': 'imex',
               'perf.tools': 'perf_tools'}


def with_health(result, problems):
    """A plan check's ``result`` with the failures no role decides (``problems``, observed on the node): they fail
    a check that applies (never one the plan skips), after the plan's own words."""
    if not problems or result['status'] == SKIP:
        return result
    text = '; '.join(problems)
    plain_pass = result['status'] == PASS and result['observed'] in ('', 'as wanted')
    result['observed'] = text if plain_pass else '{0}; {1}'.format(result['observed'], text)
    result['status'] = FAIL
    return result


def plan_check(check_id, plan):
    """The result of ``check_id`` from its role's ``plan`` (see _plan.py): fail on settings problems, facts not
    gathered or fail-level drift; warn on warn-level drift; skip where the plan says the check does not apply."""
    words = (plan.get('checks') or {}).get(check_id) or {}
    expected = words.get('expected') or 'as the {0} role leaves it'.format(plan.get('role'))
    observed = words.get('observed') or ''
    if plan.get('problems'):
        return _check(check_id, FAIL, expected, 'the settings of role {0} are invalid: {1}'.format(
            plan.get('role'), '; '.join(plan['problems'])))
    if plan.get('missing'):
        return _check(check_id, FAIL, expected, 'not gathered: {0}'.format('; '.join(plan['missing'])))
    failing = [item['msg'] for item in plan.get('drift') or []
               if item.get('check') == check_id and item.get('level', FAIL) == FAIL]
    warning = [item['msg'] for item in plan.get('drift') or []
               if item.get('check') == check_id and item.get('level', FAIL) == WARN]
    text = '; '.join(part for part in [observed] + failing + warning if part)
    if failing:
        return _check(check_id, FAIL, expected, text)
    if warning:
        return _check(check_id, WARN, expected, text)
    if words.get('skip'):
        return _check(check_id, SKIP, expected, words['skip'])
    return _check(check_id, PASS, expected, observed or 'as wanted')


def _plans_for(plans):
    """The plans of every role PLAN_CHECKS names; ReadinessError naming what is missing."""
    plans = plans if isinstance(plans, dict) else {}
    missing = sorted(set(PLAN_CHECKS.values()) - set(plans))
    if missing:
        raise ReadinessError('plans: no plan for role {0}; the checks {1} read the roles\' plans (the readiness role '
                             'makes them with gpufleet.nodeprep.node_plan)'.format(
                                 ', '.join(missing),
                                 ', '.join(sorted(c for c, r in PLAN_CHECKS.items() if r in missing))))
    for role in set(PLAN_CHECKS.values()):
        if not isinstance(plans[role], dict):
            raise ReadinessError('plans.{0}: expected a plan (a dict), got {1!r}'.format(role, plans[role]))
    return plans


def settings_problems(settings):
    """What is wrong with the readiness role's own settings (typed already): sentences naming the variable, the value
    and what is allowed; [] when they can be used.  The readiness_info action refuses the host on them before it
    gathers anything."""
    problems = []
    try:
        normalize_settings(settings)
    except ReadinessError as exc:
        problems.append(str(exc))
    lines = settings.get('nodeprep_readiness_kernel_log_lines')
    if isinstance(lines, int) and not isinstance(lines, bool) and lines < 0:
        problems.append('nodeprep_readiness_kernel_log_lines={0} is negative; allowed: 0 (do not read the kernel log) '
                        'or a positive number of lines'.format(lines))
    try:
        _perf_gates.check_overrides(settings.get('nodeprep_readiness_performance_thresholds'))
    except _perf_gates.PerfGateError as exc:
        problems.append(str(exc))
    timeout = settings.get('nodeprep_readiness_performance_timeout')
    if isinstance(timeout, int) and not isinstance(timeout, bool) and timeout < 1:
        problems.append('nodeprep_readiness_performance_timeout={0} is not a timeout; allowed: a whole number of '
                        'seconds, at least 1'.format(timeout))
    skipped = _as_list(settings.get('nodeprep_readiness_skip_checks'), 'nodeprep_readiness_skip_checks')
    unknown = sorted(set(skipped) - set(CHECK_IDS))
    if unknown:
        problems.append('nodeprep_readiness_skip_checks: unknown check ids {0}; known: {1}'.format(
            ', '.join(unknown), ', '.join(CHECK_IDS)))
    return problems


def evaluate(facts, settings, probe=None, plans=None):
    """Run every readiness check.

    ``facts``: the namespaces gpu_node_facts gathers (nvidia, kernel_state, limits, shm, nics), its
    ``nodeprep_errors``, and the health reads (``nodeprep_kernel_log``, ``nodeprep_dcgm``). A namespace that could not
    be read fails the checks that need it (never skip, never pass); one that was not asked for at all makes them
    ``skip``. ``settings``: every name of SETTING_NAMES. ``probe``: the health reads of an older call shape
    (``{'kernel_log': ...}``), folded into the facts when given. ``plans``: the roles' plans (role -> plan) made from
    the same facts, for the checks of PLAN_CHECKS.
    Returns the checks in CHECK_IDS order. Raises ReadinessError for a missing or malformed setting.
    """
    if not isinstance(facts, dict):
        raise ReadinessError('facts: expected a dict of fact namespaces, got {0}'.format(type(facts).__name__))
    settings = normalize_settings(settings)
    facts = with_probe(facts, probe)
    skipped = set(_as_list(_setting(settings, 'nodeprep_readiness_skip_checks'), 'nodeprep_readiness_skip_checks'))
    unknown = sorted(skipped - set(CHECK_IDS))
    if unknown:
        raise ReadinessError('nodeprep_readiness_skip_checks: unknown check ids {0}; known: {1}'.format(
            ', '.join(unknown), ', '.join(CHECK_IDS)))
    errors = gather_errors(facts)
    plans = _plans_for(plans)
    gpu = _gpu_node.from_plans(plans)
    results = []
    for check_id, _remedy, func, needs in CHECKS:
        if check_id in skipped:
            results.append(_check(check_id, SKIP, 'skipped by nodeprep_readiness_skip_checks', 'not checked'))
            continue
        if gpu is not None and not gpu['gpu'] and check_id in GPU_CHECKS:
            results.append(_check(check_id, SKIP, 'a GPU node', 'not a GPU node: {0}'.format(gpu['why'])))
            continue
        if check_id in PLAN_CHECKS:
            result = plan_check(check_id, plans[PLAN_CHECKS[check_id]])
            if func is not None:
                result = with_health(result, func(facts, settings))
        else:
            result = _check(check_id, *func(facts, settings))
        unmanaged = str(result['expected']).startswith('not managed')
        unread = [errors[namespace] for namespace in needs if namespace in errors]
        if unread and check_id in PLAN_CHECKS and plans[PLAN_CHECKS[check_id]].get('missing'):
            # What the gather said is the reason; the plan only knows the facts are missing.
            result['observed'] = 'could not be read: {0}'.format('; '.join(unread))
        elif unread and not unmanaged and result['status'] != FAIL:
            text = 'could not be read: {0}'.format('; '.join(unread))
            if result['status'] != SKIP:
                text += '; from what was read: {0}'.format(result['observed'])
            result['status'] = FAIL
            result['observed'] = text
        results.append(result)
    return results


def with_probe(facts, probe):
    """``facts`` with the health reads of ``probe`` (``kernel_log``, ``dcgm``) as the gather names them
    (``nodeprep_kernel_log``, ``nodeprep_dcgm``); ``facts`` itself when there is no probe."""
    if not isinstance(probe, dict):
        return facts
    out = dict(facts)
    for key, fact in (('kernel_log', 'nodeprep_kernel_log'), ('dcgm', 'nodeprep_dcgm')):
        if probe.get(key) is not None:
            out[fact] = probe[key]
    return out


def judge(facts, settings, plans):
    """One host's readiness result, as the readiness_info action returns it and the report reads it: ``checks``,
    ``summary``, ``ready`` (no check failed), ``lost_gpus`` and ``values`` (checked_values)."""
    checks = evaluate(facts, settings, None, plans)
    summary = summarize(checks)
    return {'checks': checks, 'summary': summary, 'ready': summary['status'] != FAIL,
            'lost_gpus': find_lost_gpus(facts), 'values': checked_values(facts, settings, None, plans)}


def summarize(checks):
    """Counts per status and the host's overall status (``fail`` beats ``warn`` beats ``pass``)."""
    counts = dict((status, 0) for status in STATUSES)
    for check in checks:
        counts[check['status']] = counts.get(check['status'], 0) + 1
    counts['status'] = worst(c['status'] for c in checks)
    return counts


# ---------------------------------------------------------------------------
# the values the checks looked at, for the report


def _watts(value):
    return '{0:g}'.format(float(value))


def _fmt_pct(value):
    text = '{0:.1f}'.format(value)
    return text[:-2] if text.endswith('.0') else text


def _distinct(values):
    out = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def _power_values(gpus):
    parts = []
    for gpu in gpus:
        watts = gpu.get('power_limit_w')
        default = gpu.get('default_power_limit_w')
        if watts is None:
            parts.append('unknown')
            continue
        text = '{0} W'.format(_watts(watts))
        if default:
            text += ' = {0}% of the default {1} W'.format(_fmt_pct(100.0 * watts / default), _watts(default))
        if gpu.get('min_power_limit_w') is not None and gpu.get('max_power_limit_w') is not None:
            text += ' (range {0}-{1} W)'.format(_watts(gpu['min_power_limit_w']), _watts(gpu['max_power_limit_w']))
        parts.append(text)
    distinct = _distinct(parts)
    if len(distinct) == 1:
        return '{0} on {1} GPUs'.format(distinct[0], len(gpus)) if len(gpus) > 1 else distinct[0]
    return '; '.join('{0}: {1}'.format(_gpu_label(gpu), text) for gpu, text in zip(gpus, parts))


def _limit_pair(items):
    soft, hard = _soft_hard(_memlock_item(items))
    if soft is None and hard is None:
        return 'not reported'
    return '{0}/{1}'.format(soft, hard)


def checked_values(facts, settings, probe=None, plans=None):
    """What the checks looked at on this host, as ``[label, text]`` pairs for the report.

    Only reads facts and the roles' plans (``plans``: which NICs the nic_offload plan chose); ``settings`` must be
    complete (see SETTING_NAMES).
    """
    settings = normalize_settings(settings)
    facts = with_probe(facts, probe)
    errors = gather_errors(facts)
    values = []

    def add(label, text):
        values.append([label, text])

    gpus = _gpus(facts)
    nvidia = facts.get('nvidia') or {}
    if 'nvidia' in errors:
        add('GPUs', 'could not be read: {0}'.format(errors['nvidia']))
    elif gpus:
        names = ', '.join('{0} x {1}'.format(sum(1 for g in gpus if g.get('name') == name), name)
                          for name in _distinct([g.get('name') for g in gpus]))
        add('GPUs', '{0}; driver {1}, CUDA {2}'.format(names, nvidia.get('driver_version'),
                                                       nvidia.get('cuda_version')))
        add('power limit', _power_values(gpus))
        clocks = _distinct(['{0} / {1} MHz'.format(
            _get(g, 'max_clocks', 'graphics_mhz'), _get(g, 'max_clocks', 'mem_mhz')) for g in gpus])
        add('max GPU / memory clock', ', '.join(clocks))
    pci = _get(facts, 'kernel_state', 'pci')
    if isinstance(pci, dict):
        add('PCI bus', '{0} GPUs; {1}'.format(pci.get('gpu_count'), driver_rules.fabric_text(
            _get(facts, 'kernel_state'), fabric_kind(facts))))
    elif 'kernel_state' in errors:
        add('PCI bus', 'could not be read: {0}'.format(errors['kernel_state']))
    running = _get(facts, 'kernel_state', 'running')
    if running:
        module = _get(facts, 'kernel_state', 'nvidia_module') or {}
        if module.get('loaded'):
            add('kernel', '{0}; nvidia module {1} ({2})'.format(
                running, module.get('version') or 'of unknown version', module.get('flavour') or 'flavour unknown'))
        else:
            add('kernel', '{0}; nvidia module not loaded'.format(running))
    shm = facts.get('shm')
    total = gpu_memory_bytes(facts)
    if isinstance(shm, dict):
        live = shm.get('size_bytes')
        fstab = (shm.get('fstab') or {}).get('size_bytes')
        text = '{0} live, {1} in fstab'.format('unlimited' if shm.get('unlimited') else format_size(live),
                                               format_size(fstab) if fstab else 'no size')
        if live and total:
            text += '; GPU memory {0}, so /dev/shm = {1}% of it'.format(
                format_size(total), _fmt_pct(100.0 * live / total))
        target = (_get(plans, 'shm', 'args') or {}).get('target')
        if target:
            text += '; wanted at least {0}'.format(format_size(target))
        add(shm.get('path') or SHM_PATH, text)
    elif 'shm' in errors:
        add(SHM_PATH, 'could not be read: {0}'.format(errors['shm']))
    effective = _get(facts, 'limits', 'effective')
    if isinstance(effective, dict):
        # The users and services the facts hold (the memlock role's plan chose them for the gather).
        add('memlock (soft/hard KiB)', ', '.join('{0} {1}'.format(user, _limit_pair(effective[user]))
                                                 for user in sorted(effective)) or 'no user asked for')
        systemd = _get(facts, 'limits', 'systemd') or {}
        services = systemd.get('services') if isinstance(systemd.get('services'), dict) else {}
        parts = ['DefaultLimitMEMLOCK {0}'.format(_limit_pair(systemd.get('default')))]
        parts.extend('{0} {1}'.format(name, _limit_pair(services[name])) for name in sorted(services))
        add('systemd memlock', ', '.join(parts))
    elif 'limits' in errors:
        add('memlock', 'could not be read: {0}'.format(errors['limits']))
    nics = facts.get('nics')
    # The NICs the nic_offload role's plan chose (None where it manages none).
    chosen = _get(plans, 'nic_offload', 'checks', 'nic.offload', 'nics')
    if isinstance(nics, dict) and isinstance(chosen, list):
        parts = []
        for name in chosen:
            have = _get(nics, name, 'features') or {}
            shown = ', '.join('{0} {1}'.format(feature, 'on' if (have.get(feature) or {}).get('enabled') else 'off')
                              for feature in sorted(have) if feature in ('generic-receive-offload',
                                                                         'large-receive-offload',
                                                                         'tcp-segmentation-offload',
                                                                         'generic-segmentation-offload'))
            parts.append('{0} ({1} Mb/s, MTU {2}): {3}'.format(name, _get(nics, name, 'speed_mbps'),
                                                               _get(nics, name, 'mtu'), shown or 'no offload read'))
        add('NICs checked', '; '.join(parts) or 'none chosen')
    elif 'nics' in errors:
        add('NICs', 'could not be read: {0}'.format(errors['nics']))
    nccl = (plans or {}).get('nccl') if isinstance(plans, dict) else None
    if isinstance(nccl, dict):
        # The plan's words (it compares SHA-1s; nothing decodes the file's bytes).
        words = (nccl.get('checks') or {}).get('nccl.config') or {}
        drift = [item['msg'] for item in nccl.get('drift') or [] if item.get('check') == 'nccl.config']
        add('NCCL files', '; '.join(part for part in [words.get('observed')] + drift if part) or words.get('skip')
            or words.get('expected') or 'not planned')
    return values
