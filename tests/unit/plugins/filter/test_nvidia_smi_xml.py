# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

from ansible_collections.gpufleet.nodeprep.plugins.filter.nvidia_smi_xml import FilterModule, nvidia_smi_xml
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml

XML_DIR = os.path.join(FIXTURES, 'nvidia-smi-xml')


def load(name):
    with open(os.path.join(XML_DIR, name)) as handle:
        return handle.read()


def test_registered():
    assert FilterModule().filters() == {'nvidia_smi_xml': nvidia_smi_xml}


@pytest.mark.parametrize('name', sorted(n for n in os.listdir(XML_DIR) if n.endswith('.xml')))
def test_same_structure_as_parser(name):
    text = load(name)
    result = nvidia_smi_xml(text)
    assert result == parse_nvsmi_xml(text)
    assert 'present' not in result and 'error' not in result


def test_b200_values_and_option():
    result = nvidia_smi_xml(load('b200-8gpu_k8s-test-infra.xml'), include_supported_clocks=False)
    assert (result['driver_version'], result['attached_gpus'], len(result['gpus'])) == ('580.105.08', 8, 8)
    assert [g['power_limit_w'] for g in result['gpus']] == [1000.0] * 8
    assert [g['supported_clocks'] for g in result['gpus']] == [None] * 8


def test_bytes_input():
    assert nvidia_smi_xml(load('tesla-t4-1gpu_telegraf.xml').encode('utf-8'))['gpus'][0]['name'] == 'Tesla T4'


@pytest.mark.parametrize('data, kwargs, message', [
    ('', {}, 'nvidia_smi_xml: nvidia-smi XML is empty'),
    ('<nvidia_smi_log>', {}, 'nvidia_smi_xml: nvidia-smi XML is not well-formed: no element found: line 1, column 16'),
    ('<gpus/>', {}, 'nvidia_smi_xml: expected root element <nvidia_smi_log> in nvidia-smi XML, found <gpus>'),
    (None, {}, 'nvidia_smi_xml: input must be the text nvidia-smi -q -x printed, got NoneType'),
    ({'gpus': []}, {}, 'nvidia_smi_xml: input must be the text nvidia-smi -q -x printed, got dict'),
    ('<nvidia_smi_log/>', {'include_supported_clocks': 'yes'},
     "nvidia_smi_xml: include_supported_clocks must be a boolean, got 'yes'"),
])
def test_bad_input(data, kwargs, message):
    with pytest.raises(AnsibleFilterError) as excinfo:
        nvidia_smi_xml(data, **kwargs)
    assert excinfo.value.message == message
