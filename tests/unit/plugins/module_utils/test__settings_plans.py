# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller-side plans of the settings roles agree with what the modules decide on the node."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import hashlib
import json
import os

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, ethtool_fixture

from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _gpu_settings as gs
from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _nic
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._ethtool import parse_features
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._nvsmi import parse_nvsmi_xml

with open(os.path.join(FIXTURES, 'nvidia-smi-xml', 'b200-8gpu_k8s-test-infra.xml')) as _handle:
    B200 = parse_nvsmi_xml(_handle.read())
B200.update(present=True, error=None, partial=False)
# The fixture's GPUs all print the same UUID; give each its own, as real GPUs have.
for _n, _gpu in enumerate(B200['gpus']):
    _gpu['uuid'] = 'GPU-{0:08d}-0000-0000-0000-000000000000'.format(_n)

SMI = '/usr/bin/nvidia-smi'
REPLAY = '/etc/nodeprep/gpu-settings.replay'
RECORD = '/run/nodeprep/nvidia_gpu_locks.json'
BOOT = '4a1d2c3b-0000-4000-8000-000000000001'
SETTINGS = {'gpus': 'all', 'persistence_mode': True, 'power_limit': '70%', 'power_limit_clamp': False,
            'locked_gpu_clocks': None, 'locked_memory_clocks': None, 'applications_clocks': None}


def applied(nvidia, watts=700.0, persistence=True):
    """The GPUs as nvidia_gpu leaves them after applying SETTINGS."""
    state = copy.deepcopy(nvidia)
    for gpu in state['gpus']:
        gpu['power_limit_w'] = watts
        gpu['persistence_mode'] = persistence
    return state


def replay_sha1(state, settings, daemon, record=None, boot=None):
    """SHA-1 of the replay file nvidia_gpu writes for ``state`` (its own functions, as the module calls them)."""
    decided = gs.plan_settings(state, gs.parse_settings(settings), settings['gpus'],
                               lambda gpu: gs.known_locks(record, boot, gpu), daemon,
                               lambda gpu, *args: [SMI, '-i', gpu['pci_bus_id']] + list(args), False, None, True,
                               RECORD)
    return hashlib.sha1(gs.replay_text(decided['replay']).encode('utf-8')).hexdigest()


def plan(state, settings=None, daemon=True, record_text=None, boot=BOOT, sha1='same', apply=True):
    settings = settings or SETTINGS
    if sha1 == 'same':
        try:
            record = json.loads(record_text) if record_text else None
        except ValueError:
            record = None
        sha1 = replay_sha1(state, settings, daemon, record, boot)
    return gs.role_plan(state, settings, SMI, daemon, record_text, boot, sha1, REPLAY, RECORD, apply, 'node1')


def test_fresh_gpus_need_the_power_limit():
    reasons = plan(B200, sha1=None)
    assert reasons[0].startswith('8 nvidia-smi command(s) to run: -i 00000000:8F:00.0 -pl 700')
    assert reasons[1] == REPLAY + ': the replay file differs'


def test_applied_gpus_with_their_replay_need_nothing():
    assert plan(applied(B200)) == []


def test_a_changed_replay_file_is_a_reason():
    assert plan(applied(B200), sha1='0' * 40) == [REPLAY + ': the replay file differs']


def test_replay_not_written_is_not_compared():
    assert gs.role_plan(applied(B200), SETTINGS, SMI, True, None, BOOT, None, None, RECORD, True) == []


def test_without_persistenced_persistence_mode_is_planned():
    state = applied(B200, persistence=False)
    reasons = plan(state, daemon=False)
    assert '-pm 1' in reasons[0]


def test_apply_false_only_compares_the_replay():
    assert plan(B200, apply=False) == []


LOCKED = dict(SETTINGS, locked_gpu_clocks={'min': 1500, 'max': 1965})


def record_of(state, boot=BOOT):
    return json.dumps({'boot_id': boot, 'gpus': dict(
        (g['pci_bus_id'], {'uuid': g['uuid'], 'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}})
        for g in state['gpus'])}, indent=2, sort_keys=True) + '\n'


def test_locks_recorded_this_boot_need_nothing():
    state = applied(B200)
    assert plan(state, LOCKED, record_text=record_of(state)) == []


@pytest.mark.parametrize('record_text, boot', [
    (None, BOOT),                        # no record: a lock is never taken for granted
    ('not json', BOOT),
    ('RECORD', 'another-boot'),          # a record of an earlier boot
])
def test_locks_not_known_this_boot_are_applied(record_text, boot):
    state = applied(B200)
    if record_text == 'RECORD':
        record_text = record_of(state)
    reasons = plan(state, LOCKED, record_text=record_text, boot=boot)
    assert reasons and '-lgc 1500,1965' in reasons[0]


def test_a_gpu_swapped_at_the_same_bus_id_is_unknown():
    state = applied(B200)
    text = record_of(state)
    state['gpus'][3]['uuid'] = 'GPU-ffffffff-0000-0000-0000-000000000000'
    reasons = plan(state, LOCKED, record_text=text)
    assert reasons[0].startswith('1 nvidia-smi command(s) to run')


@pytest.mark.parametrize('nvidia', [
    {'present': False, 'error': 'nvidia-smi not found', 'gpus': []},
    dict(B200, partial=True, error='rc 15'),
    None,
])
def test_gpus_not_read_completely_are_a_reason(nvidia):
    assert gs.role_plan(nvidia, SETTINGS, SMI, True, None, BOOT, None, REPLAY, RECORD) == [
        'the GPUs were not read completely']


def test_a_setting_the_module_refuses_is_a_reason():
    reasons = plan(B200, dict(SETTINGS, power_limit='5000'), sha1=None)
    assert reasons[0].startswith('the settings cannot be planned from the facts: ')
    assert 'power_limit' in reasons[0]


def test_module_and_plan_share_the_lock_record_rule():
    state = applied(B200)
    record = json.loads(record_of(state))
    gpu = state['gpus'][0]
    assert gs.known_locks(record, BOOT, gpu) == {'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}}
    assert gs.known_locks(record, 'other', gpu) == {}
    assert gs.known_locks(None, BOOT, gpu) == {}


# ---------------------------------------------------------------- nic_offload

MLX = parse_features(ethtool_fixture('mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-k_xtremeownage-blog.txt'))
IF = 'enp1s0f0np0'


def nics(gro, nm_managed=None):
    features = dict((name, dict(value)) for name, value in MLX.items())
    features['generic-receive-offload']['enabled'] = gro
    return {IF: {'features': features, 'nm_managed': nm_managed}}


def test_offload_plan_sees_what_ethtool_would_change():
    entry = _nic.offload_plan(nics(True), [IF], {'gro': False})[IF]
    assert entry['error'] is None
    assert dict(entry['changes']) == {'generic-receive-offload': {'before': True, 'after': False}}
    assert dict(entry['persistence']['nm_properties']) == {'ethtool.feature-gro': 'off'}


def test_offload_plan_nothing_to_change():
    entry = _nic.offload_plan(nics(False, nm_managed=False), [IF], {'gro': False})[IF]
    assert dict(entry['changes']) == {}
    assert entry['persistence']['nm_managed'] is False


def test_offload_plan_errors_like_the_module():
    plan_ = _nic.offload_plan(nics(False), [IF, 'eth9'], {'no-such-feature': False})
    assert plan_[IF]['error'].startswith("interface {0}: unknown feature 'no-such-feature'".format(IF))
    assert plan_['eth9']['error'] == 'interface eth9: its offload features were not gathered'


def test_unit_env_args_use_the_ethtool_names():
    persistence = {'nm_properties': {'ethtool.feature-gro': 'off', 'ethtool.feature-lro': 'off'},
                   'nm_unsupported': ['rx-gro-hw', 'rx-udp-gro-forwarding']}
    assert _nic.unit_env_args(persistence, {'gro': False, 'lro': False, 'rx-gro-hw': True}) == [
        'gro', 'off', 'lro', 'off', 'rx-gro-hw', 'on']
