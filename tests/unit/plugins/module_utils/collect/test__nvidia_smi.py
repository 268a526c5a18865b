# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/module_utils/collect/_nvidia_smi.py facts_from_output: what nvidia-smi's exit status and output
become in ansible_facts.nvidia (the real B200 capture of tests/fixtures)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nvidia_smi import facts_from_output

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))),
                       'fixtures', 'nvidia-smi-xml', 'b200-8gpu_k8s-test-infra.xml')
ARGV = ['/usr/bin/nvidia-smi', '-q', '-x']
LOST = 'Unable to determine the device handle for GPU0000:CC:00.0: Unknown Error'


def xml():
    with open(FIXTURE) as handle:
        return handle.read()


def test_exit_15_after_truncated_xml_reports_stderr_not_the_xml():
    truncated = xml()[:2800]
    facts = facts_from_output(ARGV, 15, truncated, LOST + '\n')
    assert facts['present'] is False
    assert facts['error'] == LOST


def test_exit_15_after_truncated_xml_without_stderr_says_how_much_was_printed():
    truncated = xml()[:2800]
    facts = facts_from_output(ARGV, 15, truncated, '')
    assert facts['present'] is False
    assert facts['error'].startswith('/usr/bin/nvidia-smi -q -x exited with rc 15 after printing 2800 bytes of XML '
                                     'that cannot be parsed (')
    assert '<nvidia_smi_log' not in facts['error']


def test_exit_15_after_whole_xml_keeps_the_gpus_printed():
    facts = facts_from_output(ARGV, 15, xml(), LOST)
    assert (facts['present'], facts['partial'], facts['error'], len(facts['gpus'])) == (True, True, LOST, 8)


def test_exit_0():
    facts = facts_from_output(ARGV, 0, xml(), '')
    assert (facts['present'], facts['partial'], facts['error'], len(facts['gpus'])) == (True, False, None, 8)
