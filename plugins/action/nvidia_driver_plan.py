# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.nvidia_driver_plan: the re-plans of the nvidia_driver role's later stages
take the same inputs as its node plan.  The facts are built from ``ansible_facts`` by the function the node plan uses
(_plan_nvidia_driver.driver_facts), the settings are those the node plan typed (``nodeprep_plans.nvidia_driver.args.
driver_settings``) and the run's state is reduced to what driver_plan reads (_driver.run_state); the module
then reads the driver packages on the node.  Documentation: plugins/modules/nvidia_driver_plan.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._driver import run_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans._plan_nvidia_driver import driver_facts
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain

MODULE = 'gpufleet.nodeprep.nvidia_driver_plan'


def module_args(args, ansible_facts):
    """The module's arguments: ``facts`` and ``settings`` from the play's ``ansible_facts`` when not given (the
    facts as the node plan reads them, the settings as it typed them), ``run`` reduced to what the plan reads."""
    out = dict(args)
    ansible_facts = ansible_facts if isinstance(ansible_facts, dict) else {}
    if out.get('facts') is None:
        out['facts'] = plain(driver_facts(ansible_facts))
    if out.get('settings') is None:
        node_plan = (ansible_facts.get('nodeprep_plans') or {}).get('nvidia_driver') or {}
        settings = (node_plan.get('args') or {}).get('driver_settings')
        if not isinstance(settings, dict):
            raise AnsibleActionFail(
                'settings: not given, and the play has no plan of role nvidia_driver '
                '(ansible_facts.nodeprep_plans.nvidia_driver.args.driver_settings); run '
                'gpufleet.nodeprep.node_plan with roles: [nvidia_driver] first, or give settings')
        out['settings'] = plain(settings)
    out['run'] = run_state(out.get('run'))
    return out


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = module_args(plain(self._task.args), task_vars.get('ansible_facts') or {})
        result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
        return result
