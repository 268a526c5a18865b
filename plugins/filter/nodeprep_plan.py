# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel and nvidia_driver decisions on the controller, from the facts gathered once (no module runs)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._driver_plan import PlanError, driver_plan, driver_work
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._kernel import kernel_work, os_facts
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain, plain_dict


def nvidia_driver_plan(facts, settings, stage='start', run=None, check_mode=False):
    """_driver_plan.driver_plan with the node state the gather read (facts.kernel_state.driver_node)."""
    facts = plain_dict(facts, 'nvidia_driver_plan', 'the input (the role facts)')
    node = (facts.get('kernel_state') or {}).get('driver_node')
    if not isinstance(node, dict):
        raise AnsibleFilterError('nvidia_driver_plan: the facts have no kernel_state.driver_node (gathered by an '
                                 'older gpu_node_facts, or an OS the roles do not support); use the '
                                 'gpufleet.nodeprep.nvidia_driver_plan module, which reads it on the node')
    try:
        return driver_plan(facts, plain_dict(settings, 'nvidia_driver_plan', 'settings'), node=node, stage=str(stage),
                           run=plain_dict(run or {}, 'nvidia_driver_plan', 'run'), check_mode=bool(check_mode))
    except PlanError as exc:
        raise AnsibleFilterError('nvidia_driver_plan: {0}'.format(exc))


def nvidia_driver_work(plan, facts, settings, units=None, files=None):
    """_driver_plan.driver_work: why the nvidia_driver role must run its tasks ([]: nothing to do)."""
    return driver_work(plain_dict(plan, 'nvidia_driver_work', 'the input (the plan)'),
                       plain_dict(facts, 'nvidia_driver_work', 'facts'),
                       plain_dict(settings, 'nvidia_driver_work', 'settings'),
                       plain(units) if isinstance(units, dict) else None,
                       plain(files) if isinstance(files, dict) else None)


def kernel_work_filter(kernel_state, settings, packages=None):
    """_kernel.kernel_work: why the kernel role must run its tasks ([]: nothing to do)."""
    return kernel_work(plain_dict(kernel_state, 'kernel_work', 'the input (ansible_facts.kernel_state)'),
                       plain_dict(settings, 'kernel_work', 'settings'),
                       plain(packages) if isinstance(packages, dict) else None)


def nodeprep_os_facts(facts):
    """_kernel.os_facts: the OS facts the kernel and nvidia_driver roles read (only the keys they need are read)."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError('nodeprep_os_facts: the input must be ansible_facts (a dict), got {0}'.format(
            type(facts).__name__))
    return os_facts(facts)


class FilterModule(object):
    def filters(self):
        return {'nvidia_driver_plan': nvidia_driver_plan, 'nvidia_driver_work': nvidia_driver_work,
                'nodeprep_os_facts': nodeprep_os_facts,
                'kernel_work': kernel_work_filter}
