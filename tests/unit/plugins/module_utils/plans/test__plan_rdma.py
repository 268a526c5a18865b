# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rdma role's plan (plans/_plan_rdma.py): facts + settings -> what the role does (a decision table), and idempotency.

The nodes are an HGX H100 (tests/fixtures/lspci) on Rocky 9.6's kernel; ``flavour`` says which nvidia module is loaded.
Since issue 30 ``auto`` takes DMA-BUF on the open kernel modules, so the rows about loading nvidia_peermem run on the
proprietary modules (or with ``peermem`` declared)."""

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
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import agreement

H100 = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))),
                    'fixtures', 'lspci', 'hgx-h100-8gpu-pex890xx_lspci-vvv_gpud.txt')
GPUS = ['0000:19:00.0', '0000:3b:00.0']
CX = ['0000:1a:00.0']
MISSING = dict(F.MISSING_FILE)


def dir_state(mode='0755'):
    """A gathered record of a directory."""
    return {'exists': True, 'type': 'directory', 'mode': mode, 'uid': 0, 'gid': 0, 'size': 4096, 'sha1': None,
            'target': None}


ACS_PATHS = [P.ACS_UNIT_PATH, P.ACS_SCRIPT, '/usr/libexec/platform-python'] + list(P.ACS_LIB_DIRS) + [
    P.lib_path(key) for key in P.ACS_LIB_FILES]
BARE_METAL = {'name': 'none', 'source': 'systemd-detect-virt --vm'}


def facts(rdma, files=None, units=None, flavour='open'):
    with open(H100) as handle:
        bridges = _rdma_state.relevant_devices(_rdma_path.parse_lspci_vvv(handle.read()))
    state = {'connectx': list(CX), 'peermem_loaded': False, 'peer_symbols': list(_rdma_path.PEER_MEMORY_SYMBOLS),
             'cmdline': '', 'iommu': {'groups': 0}, 'bridges': bridges, 'lspci_error': None,
             'virtualization': dict(BARE_METAL)}
    state.update(rdma)
    out = {'nodeprep_gathered': ['kernel', 'files', 'units'],
           'kernel_state': {'running': '5.14.0-570.58.1.el9_6.x86_64', 'pci': {'gpus': [{'bus_id': b} for b in GPUS],
                                                                               'gpu_count': len(GPUS)},
                            'nvidia_module': {'loaded': True, 'flavour': flavour}, 'rdma': state},
           'nodeprep_files': dict((path, dict(MISSING)) for path in [R.MODULES_LOAD_FILE] + ACS_PATHS),
           'nodeprep_units': {P.ACS_UNIT: {'load': 'not-found', 'enabled': None}}}
    out['nodeprep_files'].update(files or {})
    out['nodeprep_units'].update(units or {})
    return out


def settings(**given):
    out = _plan.defaults(P)
    out.update(given)
    return out


def context():
    return _plan.new_context(host='gpu01', extra={'role_files': _plans.role_files('rdma')})


def plan(node, **given):
    return _plan.plan_with(P, node, settings(**given), context=context())


def installed(got):
    """The gathered records of what ``got`` (a plan) writes, as they are after the run."""
    return dict((e['path'], dir_state() if e['state'] == 'directory' else F.file_state(e['content']))
                for e in got['files'])


MODULES_LOAD = F.file_state(P.render_modules_load())


# (name, rdma facts, settings, files) -> (modprobe, files changed, reasons, reports, errors)
TABLE = [
    ('nothing asked', {}, {}, {}, ([], [], [], [], [])),
    ('peermem wanted, API there, proprietary modules: load and persist', {}, {'nodeprep_rdma_peermem': True}, {},
     (['nvidia_peermem'], [R.MODULES_LOAD_FILE], ['nvidia_peermem is not loaded', R.MODULES_LOAD_FILE + ': missing'],
      [], [])),
    ('loaded and persisted: nothing to do', {'peermem_loaded': True}, {'nodeprep_rdma_peermem': True},
     {R.MODULES_LOAD_FILE: MODULES_LOAD}, ([], [], [], [], [])),
    ('loaded by hand, not persisted: persist only', {'peermem_loaded': True}, {'nodeprep_rdma_peermem': True}, {},
     ([], [R.MODULES_LOAD_FILE], [R.MODULES_LOAD_FILE + ': missing'], [], [])),
    ('API missing, peermem demanded: fails naming the symbol', {'peer_symbols': []},
     {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'peermem'}, {},
     ([], [], [], [], ['cannot load nvidia_peermem: the RDMA stack lacks '
                       'ib_register_peer_memory_client, ib_unregister_peer_memory_client (modprobe would fail with '
                       '"Unknown symbol ib_register_peer_memory_client"; install MLNX_OFED/DOCA-OFED)'])),
    ('DMA-BUF declared, proprietary modules: refused', {},
     {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'dmabuf'}, {},
     ([], [], [], [], ['DMA-BUF declared (nodeprep_rdma_path: dmabuf) but the loaded nvidia module is proprietary, '
                       'not the open kernel modules; DMA-BUF needs Linux 5.12 or later and the open kernel modules: '
                       'declare nodeprep_rdma_path: auto or peermem (with nodeprep_rdma_peermem: true) for this '
                       'node, or load the open kernel modules'])),
    ('no ConnectX device', {'connectx': []}, {'nodeprep_rdma_peermem': True}, {},
     ([], [], [], ['nvidia_peermem: no ConnectX/InfiniBand device on the PCI bus'], [])),
    # built before OFED: refused before any modprobe (the fleet's peermem-no-ofed), nothing written
    ('nvidia_peermem built without OFED: the rebuild named', {'peermem_module': {'found': True, 'depends': []}},
     {'nodeprep_rdma_peermem': True}, {},
     ([], [], [], [], ['cannot load nvidia_peermem: nvidia_peermem was built without the peer-memory API of '
                       'MLNX_OFED/DOCA-OFED (modinfo -F depends nvidia_peermem: none; no ib_core): its init returns '
                       '-EINVAL and modprobe nvidia_peermem fails with "Invalid argument"; rebuild the driver after '
                       'installing OFED (dkms install, or reinstall the driver packages), and DMA-BUF cannot serve: '
                       'the loaded nvidia module is proprietary, not the open kernel modules; nothing changed'])),
]

# The same node on the open kernel modules (kernel 5.14): auto takes DMA-BUF and never loads the legacy module.
OPEN_TABLE = [
    ('peermem wanted, API there, open modules: DMA-BUF, nothing loaded', {}, {'nodeprep_rdma_peermem': True}, {},
     ([], [], [], ['GPUDirect RDMA path: DMA-BUF (kernel 5.14.0-570.58.1.el9_6.x86_64, open kernel modules); '
                   'nvidia_peermem not loaded'], [])),
    ('API missing, DMA-BUF serves: reported', {'peer_symbols': [], 'dmabuf_symbols': ['ib_umem_dmabuf_get']},
     {'nodeprep_rdma_peermem': True}, {},
     ([], [], [], ['GPUDirect RDMA path: DMA-BUF (kernel 5.14.0-570.58.1.el9_6.x86_64, open kernel modules, RDMA '
                   'stack with ib_umem_dmabuf_get); nvidia_peermem not loaded'], [])),
    ('built without OFED, DMA-BUF serves: not in the way', {'peermem_module': {'found': True, 'depends': []}},
     {'nodeprep_rdma_peermem': True}, {},
     ([], [], [], ['GPUDirect RDMA path: DMA-BUF (kernel 5.14.0-570.58.1.el9_6.x86_64, open kernel modules); '
                   'nvidia_peermem not loaded'], [])),
    ('RDMA stack without DMA-BUF: nvidia_peermem loaded', {'dmabuf_symbols': []}, {'nodeprep_rdma_peermem': True}, {},
     (['nvidia_peermem'], [R.MODULES_LOAD_FILE], ['nvidia_peermem is not loaded', R.MODULES_LOAD_FILE + ': missing'],
      [], [])),
    ('DMA-BUF declared: nothing loaded', {}, {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'dmabuf'}, {},
     ([], [], [], ['GPUDirect RDMA path: DMA-BUF declared (nodeprep_rdma_path: dmabuf); nvidia_peermem not needed'],
      [])),
]


@pytest.mark.parametrize('name, rdma, given, files, want', OPEN_TABLE, ids=[row[0] for row in OPEN_TABLE])
def test_peermem_decision_table_open_modules(name, rdma, given, files, want):
    got = plan(facts(rdma, files), **given)
    changed = [entry['path'] for entry in got['files'] if entry['change']]
    # What the plan says of the path: its reports, and the DMA-BUF decision (args.peermem.msg; not a report, below).
    said = list(got['reports'])
    if got['args']['peermem']['action'] == 'dmabuf':
        assert got['reports'] == [], name
        said.append('GPUDirect RDMA path: {0}'.format(got['args']['peermem']['msg']))
    assert (got['args'].get('modprobe', []), changed, got['reasons'], said, got['errors']) == want, name


@pytest.mark.parametrize('given', [{'nodeprep_rdma_peermem': True},
                                   {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'dmabuf'}])
def test_a_node_already_on_dma_buf_gives_the_role_no_run(given):
    """DMA-BUF serving is the right state: nothing to do and nothing said by every run (the role's play would run on
    every node of a fleet on the open modules, every hour); readiness's rdma.peer_memory says it."""
    got = plan(facts({}), **given)
    assert got['args']['peermem']['action'] == 'dmabuf'
    assert got['run'] == [] and got['reports'] == []
    assert got['checks'][P.PEER_MEMORY]['observed'].startswith('DMA-BUF')


@pytest.mark.parametrize('name, rdma, given, files, want', TABLE, ids=[row[0] for row in TABLE])
def test_peermem_decision_table(name, rdma, given, files, want):
    got = plan(facts(rdma, files, flavour='proprietary'), **given)
    changed = [entry['path'] for entry in got['files'] if entry['change']]
    assert (got['args'].get('modprobe', []), changed, got['reasons'], got['reports'], got['errors']) == want, name


def test_acs_unit_finds_the_ports_at_boot():
    got = plan(facts({}), nodeprep_rdma_acs_unit=True)
    unit = [e for e in got['files'] if e['path'] == P.ACS_UNIT_PATH][0]
    # no bus id in the unit: the script finds the ports at every boot with the rules copied next to it
    assert [line for line in unit['content'].splitlines() if line.startswith('ExecStart=')] == [
        'ExecStart=/usr/bin/python3 -I -S /usr/local/sbin/nodeprep-pci-acs --lib /usr/local/lib/nodeprep/python']
    assert '0000:' not in unit['content']
    copies = dict((e['path'], e['content']) for e in got['files'] if e['state'] == 'file')
    assert copies[P.lib_path('rules/_rdma.py')] == _plans.role_files('rdma')['rules/_rdma.py']
    assert copies[P.ACS_SCRIPT].startswith('# -*- coding: utf-8 -*-')
    assert [e['path'] for e in got['files'] if e['state'] == 'directory'] == list(P.ACS_LIB_DIRS)
    # ACS is already off on the capture's ports: the unit is installed, nothing to clear now.
    assert got['args']['acs_ports'] == []
    assert got['reasons'] == [path + ': missing' for path in list(P.ACS_LIB_DIRS) + [
        P.lib_path(key) for key in P.ACS_LIB_FILES] + [P.ACS_SCRIPT, P.ACS_UNIT_PATH]] + [
        P.ACS_UNIT + ' is not enabled']
    assert got['units'] == [{'name': P.ACS_UNIT, 'enabled': True}]
    assert got['reports'] == ['ACS unit: clears ACS at every boot on the switch downstream ports it finds above the '
                              'GPUs and ConnectX devices (now ' + ', '.join(P._rdma.acs_unit_ports(
                                  facts({})['kernel_state']['rdma']['bridges'])) + ')']


def test_acs_unit_on_el8_runs_platform_python():
    got = plan(facts({}, files={'/usr/libexec/platform-python': F.file_state('')}), nodeprep_rdma_acs_unit=True)
    unit = [e for e in got['files'] if e['path'] == P.ACS_UNIT_PATH][0]
    assert 'ExecStart=/usr/libexec/platform-python -I -S /usr/local/sbin/nodeprep-pci-acs' in unit['content']


def test_acs_unit_clears_a_redirecting_port_and_is_idempotent():
    node = facts({})
    port = [b for b in node['kernel_state']['rdma']['bridges'] if b['bus_id'] == '0000:39:01.0'][0]
    port['acs_ctl'] = _rdma_path.parse_acs_flags('SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+')
    got = plan(node, nodeprep_rdma_acs_unit=True)
    assert got['args']['acs_ports'] == ['0000:39:01.0']
    assert 'ACS redirects peer traffic at 0000:39:01.0' in got['reasons']
    # After the run: the unit and its script written, the unit enabled, ACS cleared by it.
    after = copy.deepcopy(facts({}, files=installed(got), units={P.ACS_UNIT: {'load': 'loaded', 'enabled': 'enabled'}}))
    again = plan(after, nodeprep_rdma_acs_unit=True)
    assert (again['reasons'], again['run'], again['args']['acs_ports']) == ([], [], [])


@pytest.mark.parametrize('virt', [{'name': 'kvm', 'source': 'systemd-detect-virt --vm'},
                                  {'name': 'vmware', 'source': '/sys/class/dmi/id'}])
def test_acs_unit_refused_in_a_virtual_machine(virt):
    got = plan(_redirecting(facts({'virtualization': virt})), nodeprep_rdma_acs_unit=True)
    assert got['errors'] == ['gpu01 is a virtual machine ({0}: {1}): ACS must stay on in a virtual machine, so the '
                             "ACS boot unit is refused; set nodeprep_rdma_acs_unit: false for it and leave ACS to the "
                             "hypervisor's host".format(virt['source'], virt['name'])]
    assert (got['files'], got['units'], got['args']['acs_ports'], got['reasons']) == ([], [], [], [])


def test_acs_unit_without_lspci_fails():
    got = plan(facts({'lspci_error': 'lspci not found (install pciutils)'}), nodeprep_rdma_acs_unit=True)
    assert got['errors'] == ['ACS unit: the PCIe switch ports cannot be known: lspci -D -vvv: lspci not found '
                             '(install pciutils)']


def test_gather_asks_only_for_what_the_settings_need():
    assert P.gather(settings())['subsets'] == []
    request = P.gather(settings(nodeprep_rdma_peermem=True, nodeprep_rdma_acs_unit=True))
    assert request['subsets'] == ['kernel']
    assert request['files'] == [R.MODULES_LOAD_FILE] + ACS_PATHS
    assert request['units'] == [P.ACS_UNIT]


# ---------------------------------------------------------------------------------------------------------------------
# Agreement with readiness (tests/unit/plugins/module_utils/plans/agreement.py): the plan owns rdma.peer_memory and
# pci.acs; no fixable drift <=> the check passes, the plan refuses => the check fails, and a failure no run of the role
# changes is named as drift.

def _redirecting(node):
    port = [b for b in node['kernel_state']['rdma']['bridges'] if b['bus_id'] == '0000:39:01.0'][0]
    port['acs_ctl'] = _rdma_path.parse_acs_flags('SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+')
    return node


UNIT_ON = {'nodeprep_rdma_acs_unit': True}
ENABLED = {P.ACS_UNIT: {'load': 'loaded', 'enabled': 'enabled'}}


def _acs_unit_files():
    return installed(plan(facts({}), nodeprep_rdma_acs_unit=True))


PROP = 'proprietary'
NO_OFED = {'peermem_module': {'found': True, 'depends': []}}
KVM = {'virtualization': {'name': 'kvm', 'source': 'systemd-detect-virt --vm'}}


# (name, node, settings) -> (work, refuses, {rdma.peer_memory: status, pci.acs: status})
AGREEMENT = [
    ('nothing asked, nvidia_peermem loaded, ACS off', facts({'peermem_loaded': True}), {},
     (False, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'pass'})),
    ('nvidia_peermem wanted, the API there: load and persist',
     facts({}, flavour=PROP), {'nodeprep_rdma_peermem': True},
     (True, False, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('loaded and persisted', facts({'peermem_loaded': True}, {R.MODULES_LOAD_FILE: MODULES_LOAD}, flavour=PROP),
     {'nodeprep_rdma_peermem': True}, (False, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'pass'})),
    ('loaded by hand, not persisted: lost at the next boot', facts({'peermem_loaded': True}, flavour=PROP),
     {'nodeprep_rdma_peermem': True}, (True, False, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('not loaded and not asked for: no run of the role loads it', facts({}, flavour=PROP), {},
     (False, False, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    # issue 30: the open kernel modules on 5.12+ with ConnectX and no nvidia_peermem are ready under auto (DMA-BUF)
    ('open modules, nvidia_peermem not loaded, auto: DMA-BUF', facts({}), {},
     (False, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'pass'})),
    ('open modules, nvidia_peermem wanted, auto: DMA-BUF, nothing to load', facts({}), {'nodeprep_rdma_peermem': True},
     (False, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'pass'})),
    ('open modules, RDMA stack without DMA-BUF: nvidia_peermem loaded', facts({'dmabuf_symbols': []}),
     {'nodeprep_rdma_peermem': True}, (True, False, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('no peer-memory API, DMA-BUF cannot serve', facts({'peer_symbols': []}, flavour=PROP),
     {'nodeprep_rdma_peermem': True}, (False, True, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('no peer-memory API, nvidia_peermem demanded', facts({'peer_symbols': []}),
     {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'peermem'},
     (False, True, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('nvidia_peermem built without OFED, demanded: rebuild named', facts(NO_OFED),
     {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'peermem'},
     (False, True, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('nvidia_peermem built without OFED, not asked for', facts(NO_OFED, flavour=PROP), {},
     (False, False, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('/proc/kallsyms not read', facts({'peer_symbols': None}, flavour=PROP), {'nodeprep_rdma_peermem': True},
     (False, True, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('DMA-BUF declared with the open modules', facts({}), {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'dmabuf'},
     (False, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'pass'})),
    # The reproduced disagreement (issue 27): the plan said "nvidia_peermem not needed" and readiness failed the node.
    ('DMA-BUF asked on the proprietary modules', facts({}, flavour='proprietary'),
     {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_path': 'dmabuf'},
     (False, True, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('DMA-BUF declared on the proprietary modules, nvidia_peermem not asked for', facts({}, flavour='proprietary'),
     {'nodeprep_rdma_path': 'dmabuf'}, (False, True, {'rdma.peer_memory': 'fail', 'pci.acs': 'pass'})),
    ('no ConnectX device', facts({'connectx': []}), {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_acs_unit': True},
     (False, False, {'rdma.peer_memory': 'skip', 'pci.acs': 'skip'})),
    ('ACS redirecting, unit off: the BIOS is the fix', _redirecting(facts({'peermem_loaded': True})), {},
     (False, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'fail'})),
    ('ACS redirecting, unit on: installed, enabled and run', _redirecting(facts({'peermem_loaded': True})), UNIT_ON,
     (True, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'fail'})),
    ('ACS off, unit on but not installed yet', facts({'peermem_loaded': True}), UNIT_ON,
     (True, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'fail'})),
    ('ACS off, unit installed and enabled', facts({'peermem_loaded': True}, _acs_unit_files(), ENABLED), UNIT_ON,
     (False, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'pass'})),
    ('ACS redirecting in a VM, unit on: refused', _redirecting(facts(KVM)), UNIT_ON,
     (False, True, {'rdma.peer_memory': 'pass', 'pci.acs': 'fail'})),
    ('ACS off in a VM, unit on: refused', facts(KVM), UNIT_ON,
     (False, True, {'rdma.peer_memory': 'pass', 'pci.acs': 'fail'})),
    ('ACS off in a VM, unit off', facts(KVM), {}, (False, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'pass'})),
    ('lspci not readable, unit on', facts({'peermem_loaded': True, 'lspci_error': 'lspci not found'}), UNIT_ON,
     (False, True, {'rdma.peer_memory': 'pass', 'pci.acs': 'fail'})),
    ('lspci not readable, unit off', facts({'peermem_loaded': True, 'lspci_error': 'lspci not found'}), {},
     (False, False, {'rdma.peer_memory': 'pass', 'pci.acs': 'fail'})),
    ('not a GPU node (nodeprep_gpu_node false)', _redirecting(facts({})),
     {'nodeprep_rdma_peermem': True, 'nodeprep_rdma_acs_unit': True, 'nodeprep_gpu_node': False},
     (False, False, {'rdma.peer_memory': 'skip', 'pci.acs': 'skip'})),
]


@pytest.mark.parametrize('name, node, given, want', AGREEMENT, ids=[row[0] for row in AGREEMENT])
def test_readiness_agrees_with_the_plan(name, node, given, want):
    work, refuses, statuses = want
    agreement.assert_agrees(name, plan(node, **given), P.CHECKS, work, refuses, statuses)


def test_dmabuf_on_the_proprietary_modules_is_refused_in_the_words_readiness_reports():
    got = plan(facts({}, flavour='proprietary'), nodeprep_rdma_peermem=True, nodeprep_rdma_path='dmabuf')
    assert got['errors'] == [
        'DMA-BUF declared (nodeprep_rdma_path: dmabuf) but the loaded nvidia module is proprietary, not the open kernel '
        'modules; DMA-BUF needs Linux 5.12 or later and the open kernel modules: declare nodeprep_rdma_path: auto or '
        'peermem (with nodeprep_rdma_peermem: true) for this node, or load the open kernel modules']
    check = agreement.verdicts(got, P.CHECKS)['rdma.peer_memory']
    assert check == ('fail', got['errors'][0])
    assert got['run'] == got['errors']


def test_acs_redirecting_with_the_unit_off_names_the_port():
    got = plan(_redirecting(facts({'peermem_loaded': True})))
    assert agreement.verdicts(got, ('pci.acs',))['pci.acs'] == (
        'fail', 'ACS redirects peer traffic through the root complex at switch downstream port 0000:39:01.0 (above '
                'GPU 0000:3b:00.0): ACSCtl ReqRedir+ CmpltRedir+')
    assert got['reasons'] == [] and got['run'] == []


def test_check_mode_predicts_with_the_driver_the_run_installs():
    """Check mode on a fresh node: no nvidia module yet; the run installs the open modules first, so the real run
    takes DMA-BUF and loads nothing (molecule's check-mode comparison)."""
    node = facts({})
    node['kernel_state']['nvidia_module'] = {'loaded': False, 'version': None, 'flavour': None}
    pending = {'persistenced': True, 'flavour': 'open', 'branch': '580'}
    ctx = _plan.new_context(host='gpu01', check_mode=True, driver_pending=pending,
                            extra={'role_files': _plans.role_files('rdma')})
    got = _plan.plan_with(P, node, settings(nodeprep_rdma_peermem=True), context=ctx)
    assert (got['args']['modprobe'], got['args']['peermem']['action']) == ([], 'dmabuf')
    ctx['driver_pending'] = dict(pending, flavour='proprietary')
    got = _plan.plan_with(P, node, settings(nodeprep_rdma_peermem=True), context=ctx)
    assert got['args']['modprobe'] == ['nvidia_peermem']
    # outside check mode the node as it is decides
    got = _plan.plan_with(P, node, settings(nodeprep_rdma_peermem=True), context=context())
    assert got['args']['modprobe'] == ['nvidia_peermem']
