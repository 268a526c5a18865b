# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The rdma role's plan (see _plan.py for the plan's shape): the GPUDirect RDMA path of a node with ConnectX devices.

* The GPUDirect RDMA path (``nodeprep_rdma_path``, default ``auto``): DMA-BUF where the running kernel (5.12 or
  later), the loaded driver (the open kernel modules) and the RDMA stack (``ib_umem_dmabuf_get``) serve it, and
  nvidia_peermem (``nodeprep_rdma_peermem``) only otherwise: loaded with modprobe and persisted in
  ``/etc/modules-load.d/nvidia-peermem.conf`` when the RDMA stack exports the peer-memory API and the module was
  built with it; otherwise the role fails before any modprobe, naming the missing symbol or the rebuild
  (_rdma.peermem_plan, the decision table).
* ACS (``nodeprep_rdma_acs_unit``): a boot unit that runs ``nodeprep-pci-acs`` (roles/rdma/files), which finds at
  every boot, with lspci, the PCIe switch downstream ports above the GPUs and ConnectX devices and clears their ACS
  control with setpci: the same functions as this plan (_rdma.acs_unit_ports, _rdma.setpci_argv, from the copy of
  rules/_rdma.py and its parsers the plan installs under ``/usr/local/lib/nodeprep/python``), so a BIOS or adapter
  change that renumbers the buses changes nothing.  Refused on a virtual machine (_rdma.acs_vm_refusal), where
  ACS must stay on.  The BIOS setting is the real fix (docs/readiness.md).

The plan owns the readiness checks ``rdma.peer_memory`` and ``pci.acs``: the node's state is judged by the readiness
rules (_rdma.peer_memory_result, _rdma.acs_result; a node that nobody ran the role on is judged the same way), the
role's work for them is fixable drift (nvidia_peermem to load, its modules-load.d file, the ACS unit, its script and
rules, the ports it clears), its refusals fail them, and a failure no run of the role changes (ACS redirecting with
the unit off, nvidia_peermem not loaded where DMA-BUF cannot serve and the role is not asked to load it) is drift no
run fixes: the check passes exactly when the plan has no drift for it.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import posixpath

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans._plan_gpu_settings import (
    PLATFORM_PYTHON,
    platform_python,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rdma
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _rdma_path

ROLE = 'rdma'
PEER_MEMORY = 'rdma.peer_memory'
ACS = 'pci.acs'
CHECKS = (PEER_MEMORY, ACS)
MODE = '0644'
ACS_UNIT = 'nodeprep-pci-acs.service'
ACS_UNIT_PATH = '/etc/systemd/system/' + ACS_UNIT
ACS_SCRIPT = '/usr/local/sbin/nodeprep-pci-acs'
# Where the boot script finds the collection's own rules (a private copy, imported with Python's -I -S: no
# site-packages, no environment, so an Ansible installed on the node does not shadow it).
ACS_LIB = '/usr/local/lib/nodeprep/python'
_UTILS = 'ansible_collections/gpufleet/nodeprep/plugins/module_utils'
# ``{key: path in the collection}`` (plugin_utils/_plans.role_files): the script, and the rule modules it imports.
ROLE_FILES = {
    'acs_script': 'files/nodeprep-pci-acs',
    'rules/_rdma.py': 'plugins/module_utils/rules/_rdma.py',
    'parsers/_rdma_path.py': 'plugins/module_utils/parsers/_rdma_path.py',
    'parsers/_kernel_cmdline.py': 'plugins/module_utils/parsers/_kernel_cmdline.py',
}
ACS_LIB_FILES = tuple(sorted(key for key in ROLE_FILES if key.endswith('.py')))
ACS_LIB_DIRS = tuple(posixpath.join(ACS_LIB, _UTILS, folder) for folder in ('parsers', 'rules'))

SETTINGS = {
    'nodeprep_rdma_peermem': {
        'type': 'bool', 'default': False,
        'description': ['Load C(nvidia_peermem) and persist it in C(/etc/modules-load.d/nvidia-peermem.conf) on a '
                        'node with ConnectX devices where it is the path (V(peermem), or V(auto) where DMA-BUF '
                        'cannot serve) and the RDMA stack exports C(ib_register_peer_memory_client) (MLNX_OFED, '
                        'DOCA-OFED).',
                        'The role fails before any C(modprobe), changing nothing, where the stack lacks the symbol '
                        'or where C(nvidia_peermem) was built without it (the driver built before OFED was '
                        'installed: rebuild the driver after installing OFED).']},
    'nodeprep_rdma_path': {
        'type': 'str', 'default': 'auto', 'choices': list(_rdma.PATHS),
        'description': ['The GPUDirect RDMA path the site uses: V(auto) (DMA-BUF where the running kernel is 5.12 '
                        'or later, the loaded driver is the open kernel modules and the RDMA stack has '
                        'C(ib_umem_dmabuf_get); C(nvidia_peermem) otherwise), V(peermem) (C(nvidia_peermem) only) '
                        'or V(dmabuf) (DMA-BUF; C(nvidia_peermem) is not loaded and not needed).',
                        'NVIDIA recommends DMA-BUF; CUDA 13.0 deprecates the NV-P2P API C(nvidia_peermem) is built '
                        'on. The readiness check C(rdma.peer_memory) judges the path in use.']},
    'nodeprep_rdma_acs_unit': {
        'type': 'bool', 'default': False,
        'description': ['Install and enable C(nodeprep-pci-acs.service), which finds at every boot the PCIe switch '
                        'downstream ports above the GPUs and ConnectX devices (with lspci, by their place in the '
                        'PCI tree) and clears their ACS control (C(setpci -s <port> ECAP_ACS+0x6.w=0000)), and run '
                        'it now.',
                        'Refused on a virtual machine (C(systemd-detect-virt --vm), else the DMI names), where ACS '
                        'must stay on. Disabling ACS in the BIOS is the real fix; the unit is for nodes where that '
                        'cannot be done. Needs pciutils.']},
}
# The collection-wide nodeprep_gpu_node: the role does nothing on a node that is not a GPU node (_gpu_node.py).
SETTINGS.update(_gpu_node.SETTINGS)

UNIT_TEMPLATE = (
    '{header}\n'
    '# Clears PCIe ACS (ReqRedir, CmpltRedir...) on the switch downstream ports above the GPUs and ConnectX devices, so\n'
    '# that GPUDirect peer traffic stays in the switch (NCCL troubleshooting, "PCI Access Control Services").\n'
    '# Disabling ACS in the BIOS is the real fix. The script finds the ports with lspci at every boot; it refuses to\n'
    '# run in a virtual machine, where ACS must stay on.\n'
    '[Unit]\n'
    'Description=Clear PCIe ACS on the switch ports above the GPUs and ConnectX devices (gpufleet.nodeprep)\n'
    'DefaultDependencies=no\n'
    'After=local-fs.target systemd-udev-settle.service\n'
    'Before=nvidia-persistenced.service sysinit.target\n'
    '\n'
    '[Service]\n'
    'Type=oneshot\n'
    'RemainAfterExit=yes\n'
    'ExecStart={python} -I -S {script} --lib {lib}\n'
    '\n'
    '[Install]\n'
    'WantedBy=sysinit.target\n'
)


def gather(settings):
    request = _plan.new_gather()
    if settings['nodeprep_rdma_peermem'] or settings['nodeprep_rdma_acs_unit']:
        request['subsets'] = ['kernel']
    if settings['nodeprep_rdma_peermem']:
        request['files'] = [_rdma.MODULES_LOAD_FILE]
    if settings['nodeprep_rdma_acs_unit']:
        request['files'] = request['files'] + [ACS_UNIT_PATH, ACS_SCRIPT, PLATFORM_PYTHON] + list(ACS_LIB_DIRS) + [
            lib_path(key) for key in ACS_LIB_FILES]
        request['units'] = [ACS_UNIT]
    return request


def lib_path(key):
    """Where the boot script's copy of a rule module (``rules/_rdma.py``) lies on the node."""
    return posixpath.join(ACS_LIB, _UTILS, key)


def render_modules_load():
    return '{0}\n{1}\n'.format(_plan.managed_line(ROLE), _rdma_path.PEERMEM_MODULE)


def render_acs_unit(python):
    return UNIT_TEMPLATE.format(header=_plan.managed_line(ROLE), python=python, script=ACS_SCRIPT, lib=ACS_LIB)


def _kernel_state(facts):
    state = facts.get('kernel_state')
    return state if isinstance(state, dict) else {}


def _gpu_bus_ids(state):
    return [dev.get('bus_id') for dev in (state.get('pci') or {}).get('gpus') or []]


def _plan_peermem(plan, facts, settings, context):
    state = _kernel_state(facts)
    rdma = state.get('rdma')
    module = state.get('nvidia_module') or {}
    running, flavour, version = state.get('running'), module.get('flavour'), module.get('version')
    pending = context.get('driver_pending') if context.get('check_mode') else None
    if pending and not module.get('loaded'):
        # check mode on a node whose driver this run installs: predict with the driver it will load
        flavour, version = pending.get('flavour'), pending.get('branch')
    decision = _rdma.peermem_plan(rdma, settings['nodeprep_rdma_peermem'], settings['nodeprep_rdma_path'],
                                  running, flavour, version)
    plan['args']['peermem'] = decision
    plan['args']['modprobe'] = []
    action = decision['action']
    if action == 'skip':
        if settings['nodeprep_rdma_peermem']:
            plan['reports'].append('nvidia_peermem: {0}'.format(decision['msg']))
    elif action == 'fail':
        plan['errors'].append(decision['msg'])
        _plan.add_drift(plan, PEER_MEMORY, decision['msg'], fixable=False)
    elif action == 'dmabuf':
        # The right state (nothing to load or write): said by readiness (rdma.peer_memory's observed value) and kept
        # in args.peermem.msg, not reported by every run, so that a node already right gives the role no run.
        pass
    else:
        if action == 'load':
            plan['args']['modprobe'] = [_rdma_path.PEERMEM_MODULE]
            _plan.add_drift(plan, PEER_MEMORY, 'nvidia_peermem is not loaded')
        if decision['persist']:
            _plan.want_path(plan, facts, _rdma.MODULES_LOAD_FILE, content=render_modules_load(), mode=MODE,
                            check=PEER_MEMORY)
    verdict = _rdma.peer_memory_result(rdma, settings['nodeprep_rdma_path'], running, flavour, version)
    _plan.judge_check(plan, PEER_MEMORY, *verdict)


def _plan_acs(plan, facts, settings, context):
    plan['args']['acs_ports'] = []
    state = _kernel_state(facts)
    rdma = state.get('rdma')
    gpus = _gpu_bus_ids(state)
    status, expected, observed = _rdma.acs_result(rdma, gpus)
    if settings['nodeprep_rdma_acs_unit']:
        _unit_acs(plan, facts, rdma, gpus, context)
        expected += '; {0} installed and enabled (nodeprep_rdma_acs_unit)'.format(ACS_UNIT)
    _plan.judge_check(plan, ACS, status, expected, observed)


def _unit_acs(plan, facts, rdma, gpus, context):
    """The ACS boot unit (nodeprep_rdma_acs_unit): refused on a virtual machine; else the ports to clear now, the
    script and the rule modules it imports, the unit's file, the unit enabled."""
    why = _rdma.applies(rdma)
    if why:
        plan['reports'].append('ACS unit: {0}'.format(why))
        return
    refusal = _rdma.acs_vm_refusal(rdma.get('virtualization'), context.get('host'))
    if refusal:
        plan['errors'].append(refusal)
        _plan.add_drift(plan, ACS, refusal, fixable=False)
        return
    if rdma.get('lspci_error'):
        text = 'ACS unit: the PCIe switch ports cannot be known: lspci -D -vvv: {0}'.format(rdma['lspci_error'])
        plan['errors'].append(text)
        _plan.add_drift(plan, ACS, text, fixable=False)
        return
    ports = _rdma.acs_unit_ports(rdma.get('bridges') or [])
    if not ports:
        plan['reports'].append('ACS unit: no PCIe switch downstream port with ACS above the GPUs and ConnectX '
                               'devices')
        return
    redirecting = _rdma.acs_ports_to_clear(rdma, gpus)
    plan['args']['acs_ports'] = redirecting
    if redirecting:
        _plan.add_drift(plan, ACS, 'ACS redirects peer traffic at {0}'.format(', '.join(redirecting)))
    files = context.get('role_files') or {}
    if any(files.get(key) is None for key in ROLE_FILES):
        plan['errors'].append('the ACS boot script and the rules it imports (roles/rdma/files/nodeprep-pci-acs, '
                              'plugins/module_utils) were not handed to the plan')
    entries = [_plan.want_path(plan, facts, folder, state='directory', mode='0755', check=ACS)
               for folder in ACS_LIB_DIRS]
    entries.extend(_plan.want_path(plan, facts, lib_path(key), content=files.get(key) or '', mode=MODE, check=ACS)
                   for key in ACS_LIB_FILES)
    # run by the unit through the platform's Python, not executed directly
    entries.append(_plan.want_path(plan, facts, ACS_SCRIPT, content=files.get('acs_script') or '', mode=MODE,
                                   check=ACS))
    entries.append(_plan.want_path(plan, facts, ACS_UNIT_PATH, content=render_acs_unit(platform_python(facts)),
                                   mode=MODE, check=ACS))
    if redirecting or any(entry['change'] for entry in entries):
        plan['reports'].append('ACS unit: clears ACS at every boot on the switch downstream ports it finds above '
                               'the GPUs and ConnectX devices (now {0})'.format(', '.join(ports)))
    units = facts.get('nodeprep_units') if isinstance(facts.get('nodeprep_units'), dict) else {}
    unit = units.get(ACS_UNIT) or {}
    plan['units'].append({'name': ACS_UNIT, 'enabled': True})
    if unit.get('enabled') != 'enabled':
        _plan.add_drift(plan, ACS, '{0} is not enabled'.format(ACS_UNIT))


def plan(facts, settings, context):
    facts = facts or {}
    plan = _plan.new_plan(ROLE)
    if settings['nodeprep_rdma_path'] not in _rdma.PATHS:
        _plan.add_problem(plan, 'nodeprep_rdma_path', settings['nodeprep_rdma_path'],
                          'one of {0}'.format(', '.join(_rdma.PATHS)))
        return plan
    _plan_peermem(plan, facts, settings, context or {})
    _plan_acs(plan, facts, settings, context or {})
    return plan
