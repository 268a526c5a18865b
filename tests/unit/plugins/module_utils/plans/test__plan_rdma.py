# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rdma role's plan (plans/_plan_rdma.py): facts + settings -> what the role does (a decision table), and idempotency."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_rdma as P
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rdma as R
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _rdma_path
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _rdma_state
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F

H100 = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))),
                    'fixtures', 'lspci', 'hgx-h100-8gpu-pex890xx_lspci-vvv_gpud.txt')
GPUS = ['0000:19:00.0', '0000:3b:00.0']
CX = ['0000:1a:00.0']
MISSING = dict(F.MISSING_FILE)


def facts(rdma, files=None, units=None, flavour='open'):
    with open(H100) as handle:
        bridges = _rdma_state.relevant_devices(_rdma_path.parse_lspci_vvv(handle.read()))
    state = {'connectx': list(CX), 'peermem_loaded': False, 'peer_symbols': list(_rdma_path.PEER_MEMORY_SYMBOLS),
             'cmdline': '', 'iommu': {'groups': 0}, 'bridges': bridges, 'lspci_error': None}
    state.update(rdma)
    out = {'nodeprep_gathered': ['kernel', 'files', 'units'],
           'kernel_state': {'running': '5.14.0-570.58.1.el9_6.x86_64', 'pci': {'gpus': [{'bus_id': b} for b in GPUS],
                                                                               'gpu_count': len(GPUS)},
                            'nvidia_module': {'loaded': True, 'flavour': flavour}, 'rdma': state},
           'nodeprep_files': {R.MODULES_LOAD_FILE: dict(MISSING), P.ACS_UNIT_PATH: dict(MISSING)},
           'nodeprep_units': {P.ACS_UNIT: {'load': 'not-found', 'enabled': None}}}
    out['nodeprep_files'].update(files or {})
    out['nodeprep_units'].update(units or {})
    return out


def settings(**given):
    out = _plan.defaults(P)
    out.update(given)
    return out


def plan(node, **given):
    return _plan.plan_with(P, node, settings(**given))


MODULES_LOAD = F.file_state(P.render_modules_load())


# (name, rdma facts, settings, files) -> (modprobe, files changed, reasons, reports, errors)
TABLE = [
    ('nothing asked', {}, {}, {}, ([], [], [], [], [])),
    ('peermem wanted, API there: load and persist', {}, {'nodeprep_rdma_peermem': True}, {},
     (['nvidia_peermem'], [R.MODULES_LOAD_FILE], ['nvidia_peermem is not loaded', R.MODULES_LOAD_FILE + ': missing'],
      [], [])),
    ('loaded and persisted: nothing to do', {'peermem_loaded': True}, {'nodeprep_rdma_peermem': True},
     {R.MODULES_LOAD_FILE: MODULES_LOAD}, ([], [], [], [], [])),
    ('loaded by hand, not persisted: persist only', {'peermem_loaded': True}, {'nodeprep_rdma_peermem': True}, {},
     ([], [R.MODULES_LOAD_FILE], [R.MODULES_LOAD_FILE + ': missing'], [], [])),
    ('API missing, DMA-BUF serves: reported', {'peer_symbols': []}, {'nodeprep_rdma_peermem': True}, {},
     ([], [], [], ['GPUDirect RDMA path: the RDMA stack lacks ib_register_peer_memory_client, '
                   'ib_unregister_peer_memory_client; DMA-BUF is the path (kernel 5.14.0-570.58.1.el9_6.x86_64, open '
                   'kernel modules): declare nodeprep_rdma_path: dmabuf'], [])),
    ('API missing, peermem demanded: fails naming the symbol', {'peer_symbols': []},
     {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'peermem'}, {},
     ([], [], [], [], ['cannot load nvidia_peermem: the RDMA stack lacks '
                       'ib_register_peer_memory_client, ib_unregister_peer_memory_client (modprobe would fail with '
                       '"Unknown symbol ib_register_peer_memory_client"; install MLNX_OFED/DOCA-OFED)'])),
    ('DMA-BUF declared: nothing loaded', {}, {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'dmabuf'}, {},
     ([], [], [], ['GPUDirect RDMA path: DMA-BUF declared (nodeprep_rdma_path: dmabuf); nvidia_peermem not needed'],
      [])),
    ('no ConnectX device', {'connectx': []}, {'nodeprep_rdma_peermem': True}, {},
     ([], [], [], ['nvidia_peermem: no ConnectX/InfiniBand device on the PCI bus'], [])),
]


@pytest.mark.parametrize('name, rdma, given, files, want', TABLE, ids=[row[0] for row in TABLE])
def test_peermem_decision_table(name, rdma, given, files, want):
    got = plan(facts(rdma, files), **given)
    changed = [entry['path'] for entry in got['files'] if entry['change']]
    assert (got['args'].get('modprobe', []), changed, got['reasons'], got['reports'], got['errors']) == want, name


def test_acs_unit_lists_every_switch_port_above_the_gpus_and_nics():
    got = plan(facts({}), nodeprep_rdma_acs_unit=True)
    unit = [e for e in got['files'] if e['path'] == P.ACS_UNIT_PATH][0]
    assert [line for line in unit['content'].splitlines() if line.startswith('ExecStart=')] == [
        'ExecStart=setpci -s 0000:17:01.0 ECAP_ACS+0x6.w=0000',
        'ExecStart=setpci -s 0000:17:02.0 ECAP_ACS+0x6.w=0000',
        'ExecStart=setpci -s 0000:39:01.0 ECAP_ACS+0x6.w=0000']
    # ACS is already off on the capture's ports: the unit is installed, nothing to clear now.
    assert got['args']['acs_ports'] == []
    assert got['reasons'] == [P.ACS_UNIT_PATH + ': missing', P.ACS_UNIT + ' is not enabled']
    assert got['units'] == [{'name': P.ACS_UNIT, 'enabled': True}]


def test_acs_unit_clears_a_redirecting_port_and_is_idempotent():
    node = facts({})
    port = [b for b in node['kernel_state']['rdma']['bridges'] if b['bus_id'] == '0000:39:01.0'][0]
    port['acs_ctl'] = _rdma_path.parse_acs_flags('SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+')
    got = plan(node, nodeprep_rdma_acs_unit=True)
    assert got['args']['acs_ports'] == ['0000:39:01.0']
    assert 'ACS redirects peer traffic at 0000:39:01.0' in got['reasons']
    unit = [e for e in got['files'] if e['path'] == P.ACS_UNIT_PATH][0]
    # After the run: the unit written and enabled, ACS cleared by it.
    after = copy.deepcopy(facts({}, files={P.ACS_UNIT_PATH: F.file_state(unit['content'])},
                                units={P.ACS_UNIT: {'load': 'loaded', 'enabled': 'enabled'}}))
    again = plan(after, nodeprep_rdma_acs_unit=True)
    assert (again['reasons'], again['run'], again['args']['acs_ports']) == ([], [], [])


def test_acs_unit_without_lspci_fails():
    got = plan(facts({'lspci_error': 'lspci not found (install pciutils)'}), nodeprep_rdma_acs_unit=True)
    assert got['errors'] == ['ACS unit: the PCIe switch ports cannot be known: lspci -D -vvv: lspci not found '
                             '(install pciutils)']


def test_gather_asks_only_for_what_the_settings_need():
    assert P.gather(settings())['subsets'] == []
    request = P.gather(settings(nodeprep_rdma_peermem=True, nodeprep_rdma_acs_unit=True))
    assert request['subsets'] == ['kernel']
    assert request['files'] == [R.MODULES_LOAD_FILE, P.ACS_UNIT_PATH]
    assert request['units'] == [P.ACS_UNIT]
