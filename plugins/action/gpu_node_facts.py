# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.gpu_node_facts: run the module on the node, then parse what it returned as
read (the ``limits``, ``shm``, ``nic`` and ``imex`` subsets, ``nvidia.topology``, ``kernel_state.rdma``'s boot and
modinfo reads: plugins/plugin_utils/_gather_resolve.py), so the facts have the shape limits_facts, shm_facts,
nic_facts and kernel_facts return while the node ships none of those parsers.  Documentation: plugins/modules/gpu_node_facts.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._gather_resolve import resolve_gathered

MODULE = 'gpufleet.nodeprep.gpu_node_facts'


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        result.update(self._execute_module(module_name=MODULE, module_args=self._task.args, task_vars=task_vars))
        facts = result.get('ansible_facts')
        if result.get('failed') or not isinstance(facts, dict):
            return result
        # The module has already refused a value that is not a boolean.
        fail_on_error = boolean(self._task.args.get('fail_on_error', True), strict=False)
        warnings, failure = resolve_gathered(facts, fail_on_error, (task_vars or {}).get('inventory_hostname'))
        if failure:
            result.update(dict(failure, failed=True))
            result.pop('ansible_facts', None)
        if warnings:
            result['warnings'] = list(result.get('warnings') or []) + warnings
        return result
