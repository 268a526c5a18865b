# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.gpu_node_facts: run the module on the node, then resolve the ``limits``
subset from what the node read (plugins/plugin_utils/_limits_gather.py), so ``ansible_facts.limits`` has the shape
limits_facts returns while the node ships no pam_limits resolution.  Documentation: plugins/modules/gpu_node_facts.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._limits_gather import resolve_gathered

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
        warnings, failure = resolve_gathered(facts, fail_on_error)
        if failure:
            result.update({'failed': True, 'msg': failure, 'subset': 'limits'})
            result.pop('ansible_facts', None)
        if warnings:
            result['warnings'] = list(result.get('warnings') or []) + warnings
        return result
