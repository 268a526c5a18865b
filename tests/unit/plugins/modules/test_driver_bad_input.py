# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input to kernel_facts and to the readiness reads of gpu_node_facts (issue 11; readiness_info read the kernel log
itself before the gather did): the messages name the value and what is allowed."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.modules import gpu_node_facts, kernel_facts

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import run_module


@pytest.mark.parametrize('lines', [-5, -1])
def test_readiness_negative_kernel_log_lines(capsys, monkeypatch, lines):
    result, seen = run_module(gpu_node_facts.main, {'gather_subset': [], 'kernel_log_lines': lines}, capsys,
                              monkeypatch)
    assert result['failed'] is True
    assert result['msg'] == ('kernel_log_lines={0} is negative; allowed: 0 (do not read the kernel log) or a positive '
                             'number of lines'.format(lines))
    assert 'is 0' not in result['msg']
    assert seen == []


@pytest.mark.parametrize('root, message', [
    ('/nonexistent', 'root=/nonexistent is not a directory; give / or a tree holding proc/sys/kernel/osrelease'),
    ('/etc', 'root=/etc has no proc/sys/kernel/osrelease, so its running kernel cannot be told; give / or a tree '
             'holding that file'),
])
def test_kernel_facts_bad_root(capsys, monkeypatch, root, message):
    result, seen = run_module(kernel_facts.main, {'root': root}, capsys, monkeypatch)
    assert result['failed'] is True
    assert result['msg'] == message
    assert 'ansible_facts' not in result
