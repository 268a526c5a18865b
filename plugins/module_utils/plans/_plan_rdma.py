# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The rdma role's plan (see _plan.py for the plan's shape): the GPUDirect RDMA path of a node with ConnectX devices.

* nvidia_peermem (``nodeprep_rdma_peermem``): loaded with modprobe and persisted in
  ``/etc/modules-load.d/nvidia-peermem.conf`` when the RDMA stack exports the peer-memory API; DMA-BUF reported as
  the path where it is declared (``nodeprep_rdma_path: dmabuf``) or where the API is missing and DMA-BUF serves;
  otherwise the role fails naming the missing symbol (_rdma.peermem_plan, the decision table).
* ACS (``nodeprep_rdma_acs_unit``): a boot unit that clears the ACS control of the PCIe switch downstream ports above
  the GPUs and ConnectX devices with setpci (argv, one ``-s <port> ECAP_ACS+0x6.w=0000`` per port; the ports come
  from lspci in the gather, _rdma.acs_ports_to_clear).  The BIOS setting is the real fix (docs/readiness.md).

The plan owns the readiness checks ``rdma.peer_memory`` and ``pci.acs``: the node's state is judged by the readiness
rules (_rdma.peer_memory_result, _rdma.acs_result; a node that nobody ran the role on is judged the same way), the
role's work for them is fixable drift (nvidia_peermem to load, its modules-load.d file, the ACS unit and the ports it
clears), its refusals fail them, and a failure no run of the role changes (ACS redirecting with the unit off, no
peer-memory API and DMA-BUF not declared) is drift no run fixes: the check passes exactly when the plan has no drift
for it.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rdma
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _rdma_path

ROLE = 'rdma'
PEER_MEMORY = 'rdma.peer_memory'
ACS = 'pci.acs'
CHECKS = (PEER_MEMORY, ACS)
MODE = '0644'
ACS_UNIT = 'nodeprep-pci-acs.service'
ACS_UNIT_PATH = '/etc/systemd/system/' + ACS_UNIT
# The ACS Control register: offset 6 of the ACS extended capability (PCIe base spec; setpci knows ECAP_ACS).
ACS_CONTROL = 'ECAP_ACS+0x6.w'

SETTINGS = {
    'nodeprep_rdma_peermem': {
        'type': 'bool', 'default': False,
        'description': ['Load C(nvidia_peermem) and persist it in C(/etc/modules-load.d/nvidia-peermem.conf) on a '
                        'node with ConnectX devices whose RDMA stack exports C(ib_register_peer_memory_client) '
                        '(MLNX_OFED, DOCA-OFED).',
                        'Where the stack lacks it, the role reports DMA-BUF as the path when the kernel (5.12 or '
                        'later) and the open kernel modules can serve it, and fails naming the missing symbol '
                        'otherwise.']},
    'nodeprep_rdma_path': {
        'type': 'str', 'default': 'auto', 'choices': list(_rdma.PATHS),
        'description': ['The GPUDirect RDMA path the site uses: V(auto) (C(nvidia_peermem), else DMA-BUF when the '
                        'peer-memory API is missing), V(peermem) (C(nvidia_peermem) only) or V(dmabuf) (DMA-BUF; '
                        'C(nvidia_peermem) is not loaded and not needed).',
                        'The readiness check C(rdma.peer_memory) reads it too.']},
    'nodeprep_rdma_acs_unit': {
        'type': 'bool', 'default': False,
        'description': ['Install and enable C(nodeprep-pci-acs.service), which clears PCIe ACS at every boot on the '
                        'switch downstream ports above the GPUs and ConnectX devices (C(setpci -s <port> '
                        'ECAP_ACS+0x6.w=0000)), and run it now.',
                        'Disabling ACS in the BIOS is the real fix; the unit is for nodes where that cannot be '
                        'done. Needs pciutils.']},
}
# The collection-wide nodeprep_gpu_node: the role does nothing on a node that is not a GPU node (_gpu_node.py).
SETTINGS.update(_gpu_node.SETTINGS)

UNIT_TEMPLATE = (
    '{header}\n'
    '# Clears PCIe ACS (ReqRedir, CmpltRedir...) on the switch downstream ports above the GPUs and ConnectX devices, so\n'
    '# that GPUDirect peer traffic stays in the switch (NCCL troubleshooting, "PCI Access Control Services").\n'
    '# Disabling ACS in the BIOS is the real fix. The ports were read with lspci when the rdma role planned.\n'
    '[Unit]\n'
    'Description=Clear PCIe ACS on the switch ports above the GPUs and ConnectX devices (gpufleet.nodeprep)\n'
    'DefaultDependencies=no\n'
    'After=local-fs.target systemd-udev-settle.service\n'
    'Before=nvidia-persistenced.service sysinit.target\n'
    '\n'
    '[Service]\n'
    'Type=oneshot\n'
    'RemainAfterExit=yes\n'
    '{execs}'
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
        request['files'] = request['files'] + [ACS_UNIT_PATH]
        request['units'] = [ACS_UNIT]
    return request


def render_modules_load():
    return '{0}\n{1}\n'.format(_plan.managed_line(ROLE), _rdma_path.PEERMEM_MODULE)


def setpci_argv(port):
    """The argv that clears the ACS control of ``port`` (a bus id)."""
    return ['setpci', '-s', port, '{0}=0000'.format(ACS_CONTROL)]


def render_acs_unit(ports):
    execs = ''.join('ExecStart={0}\n'.format(' '.join(setpci_argv(port))) for port in ports)
    return UNIT_TEMPLATE.format(header=_plan.managed_line(ROLE), execs=execs)


def _kernel_state(facts):
    state = facts.get('kernel_state')
    return state if isinstance(state, dict) else {}


def _gpu_bus_ids(state):
    return [dev.get('bus_id') for dev in (state.get('pci') or {}).get('gpus') or []]


def _plan_peermem(plan, facts, settings):
    state = _kernel_state(facts)
    rdma = state.get('rdma')
    running, flavour = state.get('running'), (state.get('nvidia_module') or {}).get('flavour')
    decision = _rdma.peermem_plan(rdma, settings['nodeprep_rdma_peermem'], settings['nodeprep_rdma_path'],
                                  running, flavour)
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
        plan['reports'].append('GPUDirect RDMA path: {0}'.format(decision['msg']))
    else:
        if action == 'load':
            plan['args']['modprobe'] = [_rdma_path.PEERMEM_MODULE]
            _plan.add_drift(plan, PEER_MEMORY, 'nvidia_peermem is not loaded')
        if decision['persist']:
            _plan.want_path(plan, facts, _rdma.MODULES_LOAD_FILE, content=render_modules_load(), mode=MODE,
                            check=PEER_MEMORY)
    verdict = _rdma.peer_memory_result(rdma, settings['nodeprep_rdma_path'], running, flavour)
    _plan.judge_check(plan, PEER_MEMORY, *verdict)


def _plan_acs(plan, facts, settings):
    plan['args']['acs_ports'] = []
    state = _kernel_state(facts)
    rdma = state.get('rdma')
    gpus = _gpu_bus_ids(state)
    status, expected, observed = _rdma.acs_result(rdma, gpus)
    if settings['nodeprep_rdma_acs_unit']:
        _unit_acs(plan, facts, rdma, gpus)
        expected += '; {0} installed and enabled (nodeprep_rdma_acs_unit)'.format(ACS_UNIT)
    _plan.judge_check(plan, ACS, status, expected, observed)


def _unit_acs(plan, facts, rdma, gpus):
    """The ACS boot unit (nodeprep_rdma_acs_unit): the ports to clear now, the unit's file, the unit enabled."""
    why = _rdma.applies(rdma)
    if why:
        plan['reports'].append('ACS unit: {0}'.format(why))
        return
    if rdma.get('lspci_error'):
        text = 'ACS unit: the PCIe switch ports cannot be known: lspci -D -vvv: {0}'.format(rdma['lspci_error'])
        plan['errors'].append(text)
        _plan.add_drift(plan, ACS, text, fixable=False)
        return
    redirecting = _rdma.acs_ports_to_clear(rdma, gpus)
    ports = _rdma.switch_ports_checked(rdma.get('bridges') or [], list(gpus) + list(rdma.get('connectx') or []))
    if not ports:
        plan['reports'].append('ACS unit: no PCIe switch downstream port above the GPUs and ConnectX devices')
        return
    plan['args']['acs_ports'] = redirecting
    if redirecting:
        _plan.add_drift(plan, ACS, 'ACS redirects peer traffic at {0}'.format(', '.join(redirecting)))
    _plan.want_path(plan, facts, ACS_UNIT_PATH, content=render_acs_unit(ports), mode=MODE, check=ACS)
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
    _plan_peermem(plan, facts, settings)
    _plan_acs(plan, facts, settings)
    return plan
