# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nodeprep_nccl_plan filter: the role's plan from the one NCCL rule set (plugins/module_utils/_nccl.py)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.filter.nodeprep_nccl import FilterModule


def test_plan_through_the_filter():
    plan = FilterModule().filters()['nodeprep_nccl_plan']
    result = plan({'nccl-debug': 'WARN', 'NCCL_DEBUG': ['WARN']}, torch_env={'TORCH_NCCL_HIGH_PRIORITY': True})
    assert result['conf_content'] is None
    assert result['torch_env'] == {'TORCH_NCCL_HIGH_PRIORITY': '1'}
    assert result['errors'] == [
        'nodeprep_nccl_conf: names that are not environment variable names: nccl-debug (allowed: NAME matching '
        '[A-Z_][A-Z0-9_]*); nodeprep_nccl_conf: values that are not one-line scalars: NCCL_DEBUG (allowed: a string, '
        'number or boolean on one line)']
    assert plan({})['conf_content'] is None
    assert plan({'NCCL_DEBUG': 'WARN'})['conf_content'] == 'NCCL_DEBUG=WARN\n'
