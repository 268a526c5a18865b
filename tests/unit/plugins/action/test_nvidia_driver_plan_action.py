# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/action/nvidia_driver_plan.py: the later-stage re-plans of the nvidia_driver role take the same
facts and settings as its node plan (issue #22: no Jinja assembly in vars/main.yml, the module and the plan agree)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.nodeprep.plugins.action import nvidia_driver_plan as A
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver as P
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import test__plan_nvidia_driver as T


def _play_facts(state, given=None, check_mode=False):
    """ansible_facts after node_plan: the gathered facts and the role's plan."""
    facts = copy.deepcopy(state)
    facts['nodeprep_plans'] = {'nvidia_driver': T.make_plan(state, given, check_mode=check_mode)}
    return facts


@pytest.mark.parametrize('state, given', [
    (T.facts('converged'), {}),
    (T.facts('fresh'), {'nodeprep_reboot_ok': 'false', T.D.PREFIX + 'imex': 'true'}),
    (T.facts('converged', nvidia_module={'loaded': True, 'version': T.VERSION, 'flavour': 'proprietary'}),
     {T.D.PREFIX + 'persistenced': 'no'}),
])
def test_the_start_stage_from_the_action_is_the_node_plan(state, given):
    """Same facts, same typed settings: driver_plan at the start from the module's arguments is the node plan's."""
    play = _play_facts(state, given)
    node_plan = play['nodeprep_plans']['nvidia_driver']
    args = A.module_args({'stage': 'start', 'run': {}}, play)
    assert args['facts'] == T.D.driver_facts(state)
    assert args['settings'] == node_plan['args']['driver_settings']
    again = P.driver_plan(args['facts'], args['settings'], node=state['kernel_state']['driver_node'], stage='start',
                          run=args['run'])
    assert again == node_plan['args']['driver']


def test_facts_and_settings_given_are_kept():
    args = A.module_args({'facts': {'os': {}}, 'settings': {'branch': '570'}, 'run': None}, {})
    assert (args['facts'], args['settings']) == ({'os': {}}, {'branch': '570'})
    assert args['run'] == {'start_version': '', 'installing': False, 'modprobe': {}}


def test_without_a_node_plan_the_action_says_what_to_run_first():
    with pytest.raises(AnsibleActionFail) as exc:
        A.module_args({'stage': 'installed'}, T.facts('converged'))
    assert str(exc.value) == (
        'settings: not given, and the play has no plan of role nvidia_driver (ansible_facts.nodeprep_plans.'
        'nvidia_driver.args.driver_settings); run gpufleet.nodeprep.node_plan with roles: [nvidia_driver] first, or '
        'give settings')


@pytest.mark.parametrize('run, wanted', [
    # modprobe skipped (the driver was loaded): nothing of it is read.
    ({'start_version': '570.172.08', 'installing': 'True',
      'modprobe': {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}},
     {'start_version': '570.172.08', 'installing': True, 'modprobe': {}}),
    # modprobe failed (module held by the initramfs): its rc and stderr, as registered.
    ({'start_version': '', 'installing': False,
      'modprobe': {'changed': False, 'rc': 1, 'stdout': '', 'stderr': 'modprobe: ERROR: could not insert nvidia',
                   'cmd': ['modprobe', 'nvidia'], 'failed': False}},
     {'start_version': '', 'installing': False,
      'modprobe': {'rc': 1, 'stdout': '', 'stderr': 'modprobe: ERROR: could not insert nvidia'}}),
    ({}, {'start_version': '', 'installing': False, 'modprobe': {}}),
])
def test_run_state(run, wanted):
    assert P.run_state(run) == wanted


def test_a_failed_modprobe_becomes_a_reboot_reason_through_the_action():
    state = T.facts('converged', nvidia_module=dict(T.NOT_LOADED))
    play = _play_facts(state)
    args = A.module_args({'stage': 'installed', 'run': {
        'start_version': T.VERSION, 'installing': False,
        'modprobe': {'rc': 1, 'stdout': '', 'stderr': 'modprobe: ERROR: could not insert nvidia: Device busy\n'}}},
        play)
    plan = P.driver_plan(args['facts'], args['settings'], node=state['kernel_state']['driver_node'],
                         stage='installed', run=args['run'])
    assert plan['reboot']['reasons'] == [
        'nvidia_driver: modprobe nvidia failed: modprobe: ERROR: could not insert nvidia: Device busy']
    assert plan['reboot']['allowed'] is False
