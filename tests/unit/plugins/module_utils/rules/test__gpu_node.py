# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU rule (plugins/module_utils/rules/_gpu_node.py): PCI scan + nodeprep_gpu_node -> GPU node or not, and what it does
to the plans of the GPU roles and to readiness on a node without NVIDIA GPUs (a login node, the Slurm controller)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

import pytest

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node as G
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness as R
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import test__plan_nvidia_driver as DT

NO_GPU_PCI = {'gpus': [], 'gpu_count': 0, 'nvswitches': [], 'nvswitch_count': 0, 'nvlink5_bridges': [],
              'nvlink5_bridge_count': 0, 'nvswitch_fabric': 'none'}


def pci(count):
    return {'kernel_state': {'pci': {'gpu_count': count}}, 'nodeprep_errors': {}}


# setting, facts, GPU node, why
DECISIONS = [
    ('auto', pci(8), True, '8 NVIDIA GPUs on the PCI bus'),
    ('auto', pci(1), True, '1 NVIDIA GPU on the PCI bus'),
    ('auto', pci(0), False, 'no NVIDIA GPU on the PCI bus'),
    (None, pci(0), False, 'no NVIDIA GPU on the PCI bus'),
    ('AUTO', pci(0), False, 'no NVIDIA GPU on the PCI bus'),
    ('auto', {}, True, 'PCI bus not read: treated as a GPU node'),
    ('auto', {'kernel_state': {'error': 'no /sys'}}, True, 'PCI bus not read: treated as a GPU node'),
    ('auto', dict(pci(0), nodeprep_errors={'kernel': 'kernel facts: failed'}), True,
     'PCI bus not read: treated as a GPU node'),
    (True, pci(0), True, 'nodeprep_gpu_node is true'),
    ('true', pci(0), True, 'nodeprep_gpu_node is true'),
    ('yes', {}, True, 'nodeprep_gpu_node is true'),
    (False, pci(8), False, 'nodeprep_gpu_node is false'),
    ('false', pci(8), False, 'nodeprep_gpu_node is false'),
    ('no', pci(8), False, 'nodeprep_gpu_node is false'),
]


@pytest.mark.parametrize('value, facts, gpu, why', DECISIONS)
def test_decision_table(value, facts, gpu, why):
    decision = G.decide(facts, value)
    assert (decision['gpu'], decision['why'], decision['problem']) == (gpu, why, None)


@pytest.mark.parametrize('value', ['maybe', 2, -1, 0.5, '2', 'none', 'null', ['auto'], {'gpu': True}])
def test_a_value_that_is_not_auto_true_or_false_is_a_problem(value):
    decision = G.decide(pci(0), value)
    assert decision['gpu'] is True
    assert decision['problem'] == 'nodeprep_gpu_node={0!r}: {1}'.format(value, G.ALLOWED)
    assert G.ALLOWED.startswith('allowed: auto, true or false (') and '1/0 as text or numbers' in G.ALLOWED


# Every spelling of a boolean that Ansible's validator types for a bool setting (convert_bool.boolean), as -e gives it
# (text) and as YAML gives it (a number): the GPU rule reads each as that boolean, "0" as 0 (0 was refused while "0"
# was false).
BOOLEAN_SPELLINGS = ['true', 'True', 'TRUE', ' yes ', 'on', 'y', 't', '1', 1, 1.0, True,
                     'false', 'False', 'no', 'off', 'n', 'f', '0', ' 0 ', 0, 0.0, False]


@pytest.mark.parametrize('value', BOOLEAN_SPELLINGS, ids=[repr(v) for v in BOOLEAN_SPELLINGS])
def test_a_boolean_means_what_it_means_to_ansible(value):
    assert G.parse(value) is boolean(value)
    decision = G.decide(pci(8), value)
    assert decision['problem'] is None and decision['gpu'] is boolean(value)


@pytest.mark.parametrize('value', ['maybe', 2, -1, 0.5, '2', 'none'])
def test_what_ansible_refuses_as_a_boolean_is_refused(value):
    with pytest.raises(TypeError):
        boolean(value)
    with pytest.raises(ValueError, match='allowed: auto, true or false'):
        G.parse(value)


def test_text_zero_and_number_zero_plan_alike():
    given = [plan('nvidia_driver', DT.facts('fresh'), {'nodeprep_gpu_node': value}) for value in ('0', 0, 'false')]
    # The raw setting keeps the form given (plan['settings']); everything the plan decides is the same.
    for one in given:
        assert one.pop('settings')['nodeprep_gpu_node'] in ('0', 0, 'false')
    assert given[0] == given[1] == given[2]
    assert given[0]['problems'] == [] and given[0]['gpu_node'] == {'gpu': False, 'why': 'nodeprep_gpu_node is false'}


@pytest.mark.parametrize('value, needs', [('auto', True), (None, True), (True, False), ('false', False),
                                          ('maybe', False)])
def test_only_auto_reads_the_pci_bus(value, needs):
    assert G.needs_pci(value) is needs


def login_node(**kw):
    """ansible_facts of a fresh EL9 node with no NVIDIA device on its PCI bus (the Slurm controller)."""
    return DT.facts('fresh', pci=copy.deepcopy(NO_GPU_PCI), **kw)


def plan(role, node, given=None):
    settings, problems = _plans.typed_settings(role, given or {})
    return _plans.plan_role(role, node, settings, problems, _plan.new_context(host='slurm-head'))


LINE = ('not a GPU node (no NVIDIA GPU on the PCI bus): no work of the GPU roles (kernel, nvidia_driver, '
        'gpu_settings, nccl, rdma, dcgm); set nodeprep_gpu_node: true for a node whose GPUs are not seated yet')


@pytest.mark.parametrize('role', G.GPU_ROLES)
def test_a_gpu_role_does_nothing_on_a_node_without_gpus_and_says_so(role):
    got = plan(role, login_node())
    assert got['gpu_skip'] == LINE
    assert got['reports'] == [LINE]
    assert (got['run'], got['reasons'], got['files'], got['drift'], got['errors'], got['missing']) == \
        ([], [], [], [], [], [])
    assert got['reboot'] == {'needed': False, 'why': []}
    assert got['gpu_node'] == {'gpu': False, 'why': 'no NVIDIA GPU on the PCI bus'}
    for check in getattr(_plans.rules(role), 'CHECKS', ()):
        assert got['checks'][check]['skip'] == 'no NVIDIA GPU on the PCI bus'


def test_the_driver_plans_a_full_install_on_the_same_node_with_gpus_or_when_told():
    with_gpu = plan('nvidia_driver', DT.facts('fresh'))
    assert with_gpu['gpu_skip'] is None and with_gpu['reasons'] and with_gpu['run']
    told = plan('nvidia_driver', login_node(), {'nodeprep_gpu_node': 'true'})
    # The same install (less the fabric manager: the login node's bus has no NVSwitch either).
    assert told['gpu_skip'] is None and told['reasons'][0] == with_gpu['reasons'][0]
    assert told['gpu_node'] == {'gpu': True, 'why': 'nodeprep_gpu_node is true'}


def test_false_keeps_a_node_with_gpus_out_of_the_gpu_roles():
    got = plan('nvidia_driver', DT.facts('fresh'), {'nodeprep_gpu_node': False})
    assert got['gpu_skip'] == LINE.replace('no NVIDIA GPU on the PCI bus', 'nodeprep_gpu_node is false')
    assert got['run'] == []


def test_an_invalid_value_is_a_problem_of_every_gpu_role_and_runs_it():
    got = plan('kernel', login_node(), {'nodeprep_gpu_node': 'maybe'})
    assert got['problems'] == ["nodeprep_gpu_node='maybe': " + G.ALLOWED]
    assert got['run'] == ["invalid settings: nodeprep_gpu_node='maybe': " + G.ALLOWED]


@pytest.mark.parametrize('role', ['memlock', 'shm', 'nic_offload'])
def test_the_other_roles_are_not_gpu_roles(role):
    settings, problems = _plans.typed_settings(role, {})
    assert 'nodeprep_gpu_node' not in settings
    assert 'gpu_skip' not in plan(role, login_node())


def test_a_gpu_role_alone_gathers_the_pci_bus_only_when_auto():
    settings, _problems = _plans.typed_settings('gpu_settings', {})
    assert 'kernel' in _plans.gather_request(['gpu_settings'], {'gpu_settings': settings})['subsets']
    settings, _problems = _plans.typed_settings('gpu_settings', {'nodeprep_gpu_node': True})
    assert 'kernel' not in _plans.gather_request(['gpu_settings'], {'gpu_settings': settings})['subsets']


def readiness_settings():
    settings = dict((name, None) for name in R.SETTING_NAMES)
    settings.update({'nodeprep_expected_gpus': 0, 'nodeprep_readiness_xid_fail': [], 'nodeprep_readiness_skip_checks':
                     [], 'nodeprep_nvidia_driver_blacklist_nouveau': True, 'nodeprep_nvidia_driver_persistenced': True,
                     'nodeprep_kernel_source': 'distro', 'nodeprep_nvidia_driver_open_required_device_ids': [],
                     'nodeprep_rdma_path': 'auto'})
    return settings


def test_readiness_skips_every_gpu_check_on_a_node_without_gpus():
    node = login_node()
    plans = dict((role, plan(role, node)) for role in _plans.SITE_ROLES)
    checks = dict((c['id'], c) for c in R.evaluate(node, readiness_settings(), probe=None, plans=plans))
    for check_id in R.GPU_CHECKS:
        assert (checks[check_id]['status'], checks[check_id]['observed']) == \
            ('skip', 'not a GPU node: no NVIDIA GPU on the PCI bus'), check_id
    assert R.GPU_CHECKS == ('kernel.devel_matched', 'driver.nouveau_blacklisted', 'driver.loaded',
                            'driver.open_modules', 'driver.persistenced', 'gpu.count', 'gpu.power_limit',
                            'gpu.clocks', 'gpu.health', 'gpu.throttle', 'pci.link', 'nvlink.links',
                            'gpu.remapped_rows', 'gpu.mig', 'gpu.vbios', 'nccl.config', 'fabric.manager', 'gpu.fabric',
                            'gpu.topology', 'gpu.dcgm_diag',
                            'rdma.peer_memory', 'pci.acs', 'kernel.iommu', 'perf.tools', 'perf.allreduce',
                            'perf.nvbandwidth')
    assert 'fail' not in [checks[c]['status'] for c in R.GPU_CHECKS]


def test_readiness_checks_the_gpus_of_a_node_told_it_has_some():
    node = login_node()
    plans = dict((role, plan(role, node, {'nodeprep_gpu_node': True})) for role in _plans.SITE_ROLES)
    checks = dict((c['id'], c) for c in R.evaluate(node, readiness_settings(), probe=None, plans=plans))
    assert checks['driver.nouveau_blacklisted']['status'] == 'fail'
