# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/module_utils/parsers/_dcgmi.py and rules/_dcgm.py: the parsers on real captures (tests/fixtures/dcgmi, SOURCES.md says where
each comes from), the readiness rule gpu.dcgm_diag, and the package decision of the dcgm role."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _dcgm as d
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dcgmi
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dcgmi_cli

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))),
                        'fixtures', 'dcgmi')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


GB10 = fixture('gb10-1gpu-dcgm4.2.3-diag-r1-persistence-off.json')
ISSUE215 = fixture('h100-8gpu-dcgm4-diag-diagnostic-test-excerpt_dcgm-issue215.txt')
NVVS3 = fixture('nvvs-8gpu-dcgm3.1.0-diag-json_dcgm-jsonresulttests.txt')
DISCOVERY = fixture('h100-4gpu-dcgm3.1.7-discovery-l_dcgm-issue229.txt')


def wrap_215(status_of_gpu3=None):
    """The issue #215 excerpt (one test object of a real 4.x document, ending with a comma) inside the envelope the
    4.x schema gives it.  Built here; the excerpt itself is not changed."""
    text = ISSUE215.rstrip().rstrip(',')
    doc = '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [' + text + ']}]}, ' \
          '"metadata": {"version": "4.1.1"}}'
    if status_of_gpu3:
        loaded = json.loads(doc)
        result = loaded['DCGM Diagnostic']['test_categories'][0]['tests'][0]['results'][3]
        result['status'] = status_of_gpu3
        result['warnings'] = [{'warning': 'GPU 3 failed its diagnostic', 'error_id': 61, 'error_category': 1,
                               'error_severity': 2}]
        doc = json.dumps(loaded)
    return doc


# DCGM 3.x dcgmi output, BUILT FROM THE SCHEMA (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json at a33560c9, the
# 3.x one) and v3.3.9 dcgmi/Diag.cpp: no public capture of a complete 3.x `dcgmi diag -j` was found (SOURCES.md).
# What Diag.cpp does and this input copies: the Deployment tests have one result for all GPUs, with "gpu_id" only
# when there is an error and the error text under "warnings" (the level-one writer); the per-GPU tests write
# "gpu_id" as a string and the text under "warning"; "version" and "Driver Version Detected" are top-level keys.
SCHEMA_BUILT_3X_PERSISTENCE_OFF = json.dumps({
    'DCGM GPU Diagnostic': {'test_categories': [{'category': 'Deployment', 'tests': [
        {'name': 'Denylist', 'results': [{'status': 'Pass'}]},
        {'name': 'Persistence Mode', 'results': [{
            'status': 'Fail', 'gpu_id': 1,
            'warnings': [{'warnings': 'Persistence mode for GPU 1 is disabled. Enable persistence mode by running '
                                      '"nvidia-smi -i <gpuId> -pm 1 " as root.',
                          'error_id': 29, 'error_category': 8, 'error_severity': 5}]}]}]}]},
    'version': '3.3.9', 'Driver Version Detected': '550.127.05', 'GPU Device IDs': ['2330'],
    'GPU Device Serials': {'0': 'x'}})
SCHEMA_BUILT_3X_PCIE = json.dumps({
    'DCGM GPU Diagnostic': {'test_categories': [{'category': 'Integration', 'tests': [
        {'name': 'PCIe', 'results': [
            {'gpu_id': '0', 'status': 'Pass'},
            {'gpu_id': '1', 'status': 'Fail', 'warnings': [{
                'warning': 'GPU 1 has a PCIe link width of 8, which is lower than the expected 16', 'error_id': 53,
                'error_category': 1, 'error_severity': 2}]}]}]}]},
    'version': '3.3.9', 'Driver Version Detected': '550.127.05'})

H100 = [{'index': i, 'pci_bus_id': '00000000:{0}:00.0'.format(bus)} for i, bus in enumerate(['4C', '5D', 'CC', 'DC'])]


# ---------------------------------------------------------------------------------------------------------------------
# parsers on the captures

def test_gb10_capture_is_dcgm4_with_the_persistence_failure():
    parsed = _dcgmi.parse_diag(GB10)
    assert parsed['generation'] == '4'
    assert parsed['version'] == '4.2.3'
    assert parsed['driver_version'] == '580.82.09'
    assert parsed['summaries'] == {'software': 'Fail'}
    assert parsed['results'] == [{
        'category': 'Deployment', 'test': 'software', 'entity_group': 'GPU', 'entity_id': 0, 'status': 'Fail',
        'warnings': [{'text': 'Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by '
                              'running "nvidia-smi -i <gpuId> -pm 1 " as root.',
                      'error_id': 29, 'severity': 5, 'category': 8}],
        'info': []}]


def test_issue215_excerpt_reads_eight_gpus_with_their_info():
    parsed = _dcgmi.parse_diag(wrap_215())
    assert [(r['test'], r['entity_id'], r['status']) for r in parsed['results']] == [
        ('diagnostic', i, 'Pass') for i in range(8)]
    assert parsed['results'][0]['info'][2] == 'GPU 0 calculated at approximately 859.08 gigaflops during this test'
    assert parsed['results'][7]['info'] == []
    assert parsed['summaries'] == {'diagnostic': 'Pass'}


def test_nvvs_3x_real_output_reads_with_nulls_capitals_and_gpu_lists():
    parsed = _dcgmi.parse_diag(NVVS3)
    assert parsed['generation'] == '3'
    assert parsed['version'] == '3.1.0'
    deployment = [r for r in parsed['results'] if r['category'] == 'Deployment']
    assert len(deployment) == 9
    # "0,1,2,3,4,5,6,7": one result that stands for every GPU.
    assert set(r['entity_id'] for r in deployment) == {None}
    custom = [r for r in parsed['results'] if r['category'] == 'Custom']
    assert [(r['entity_id'], r['status']) for r in custom] == [(i, 'Pass') for i in range(8)]


def test_schema_built_3x_reads_the_deployment_warnings_key():
    parsed = _dcgmi.parse_diag(SCHEMA_BUILT_3X_PERSISTENCE_OFF)
    assert parsed['generation'] == '3'
    assert parsed['version'] == '3.3.9'
    failed = [r for r in parsed['results'] if r['status'] == 'Fail'][0]
    assert failed['entity_id'] == 1
    assert failed['warnings'][0]['text'].startswith('Persistence mode for GPU 1 is disabled.')
    assert failed['warnings'][0]['error_id'] == 29


@pytest.mark.parametrize('text, message', [
    ('', 'no JSON document'),
    ('Error: Unable to connect to host engine. Host engine connection invalid/disconnected.', 'no JSON document'),
    ('{"DCGM Diagnostic": ', 'no JSON document'),
    ('{"DCGM Diagnostic": {"test_categories": [}', 'not valid JSON'),
    ('{"something": {}}', 'neither "DCGM Diagnostic"'),
])
def test_parse_diag_refuses_what_is_not_a_diagnostic(text, message):
    with pytest.raises(_dcgmi.DcgmError, match=message):
        _dcgmi.parse_diag(text)


def test_discovery_capture():
    found = _dcgmi.parse_discovery(DISCOVERY)
    assert found['gpu_count'] == 4
    assert found['nvswitch_count'] == 0
    assert found['nvswitches'] == []
    assert found['gpus'][1] == {'id': 1, 'name': '<<<NULL>>>', 'pci_bus_id': '00000000:5D:00.0',
                                'uuid': 'GPU-75c4ee16-a840-6f6c-9a7b-5ed8f41598b8'}
    assert [g['id'] for g in found['gpus']] == [0, 1, 2, 3]


def test_discovery_of_dcgm4_with_switches():
    # The 4.x wording (dcgmi/Query.cpp: "GPUs found (Active).", "NvSwitch found." / "NvSwitches found."), built from
    # the source around the table layout of the issue #229 capture.
    text = DISCOVERY.replace('4 GPUs found.', '4 GPUs found (Active).').replace(
        '0 NvSwitches found.\n+-----------+\n| Switch ID |\n+-----------+\n',
        '2 NvSwitches found.\n+-----------+\n| Switch ID |\n+-----------+\n| 0         |\n| 1         |\n')
    found = _dcgmi.parse_discovery(text)
    assert (found['gpu_count'], found['nvswitch_count'], found['nvswitches']) == (4, 2, [0, 1])
    assert len(found['gpus']) == 4


# ---------------------------------------------------------------------------------------------------------------------
# settings

@pytest.mark.parametrize('value, level', [(1, 1), ('2', 2), (4, 4)])
def test_levels(value, level):
    assert d.check_level(value) == level


@pytest.mark.parametrize('value', [0, 5, '1.5', 1.5, 'long', None, True])
def test_bad_levels_name_the_value_and_what_is_allowed(value):
    with pytest.raises(_dcgmi.DcgmError) as err:
        d.check_level(value)
    assert 'nodeprep_readiness_dcgm_level={0!r}'.format(value) in str(err.value)
    assert 'allowed: 1, 2, 3, 4' in str(err.value)


@pytest.mark.parametrize('value', [0, -1, 1.5, '60', True])
def test_bad_timeouts(value):
    with pytest.raises(_dcgmi.DcgmError, match='nodeprep_readiness_dcgm_timeout'):
        d.check_timeout(value)


def test_argv():
    assert _dcgmi_cli.diag_argv('/usr/bin/dcgmi', 3) == ['/usr/bin/dcgmi', 'diag', '-r', '3', '-j']
    assert _dcgmi_cli.discovery_argv('/usr/bin/dcgmi') == ['/usr/bin/dcgmi', 'discovery', '-l']


# ---------------------------------------------------------------------------------------------------------------------
# the readiness rule

def probe(diag_stdout, rc=0, discovery=DISCOVERY, discovery_rc=0, **extra):
    out = {'enabled': True, 'level': 1, 'timeout': 300, 'dcgmi': '/usr/bin/dcgmi',
           'discovery': {'rc': discovery_rc, 'stdout': discovery, 'stderr': ''},
           'diag': {'rc': rc, 'stdout': diag_stdout, 'stderr': '', 'timed_out': False}}
    out.update(extra)
    return out


NO_ENGINE = ('Error: unable to establish a connection to the specified host: localhost\n'
             'Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n')


@pytest.mark.parametrize('the_probe, status, words', [
    (None, 'skip', 'nodeprep_readiness_dcgm is false'),
    ({'enabled': False}, 'skip', 'nodeprep_readiness_dcgm is false'),
    ({'enabled': True, 'dcgmi': None}, 'skip', 'DCGM is not installed'),
])
def test_skips_say_why(the_probe, status, words):
    got, expected, observed = d.judge(the_probe, H100)
    assert got == status
    assert words in observed
    assert expected.startswith('dcgmi diag -r 1: every test passes')


def test_host_engine_stopped_fails_naming_the_unit():
    # the operator asked for the diagnostic (enabled) and nvidia-dcgm.service is stopped: not proven, so it fails
    # (it skipped before); dcgmi's own words (dcgmi/Command.cpp) on both commands
    for the_probe in (probe('', discovery=NO_ENGINE, discovery_rc=d.RC_NO_HOST_ENGINE),
                      probe(NO_ENGINE, rc=d.RC_NO_HOST_ENGINE, discovery='', discovery_rc=d.RC_NO_HOST_ENGINE)):
        status, expected, observed = d.judge(the_probe, H100)
        assert status == 'fail'
        assert observed.startswith('the DCGM host engine is not running (nvidia-dcgm.service not active: dcgmi '
                                   'cannot connect), so the diagnostic nodeprep_readiness_dcgm asks for could not '
                                   'run; start it (systemctl start nvidia-dcgm.service)')
        assert expected.startswith('dcgmi diag -r 1: every test passes')


def edit_215(change):
    """The wrapped issue #215 document with ``change(test)`` applied to its one test object (a real 4.x test)."""
    loaded = json.loads(wrap_215())
    change(loaded['DCGM Diagnostic']['test_categories'][0]['tests'][0])
    return json.dumps(loaded)


def test_test_summary_fail_fails_though_every_result_passed():
    def summary_fails(test):
        test['test_summary'] = {'status': 'Fail', 'warnings': [
            {'warning': 'The diagnostic plugin exited early', 'error_id': 8, 'error_category': 1,
             'error_severity': 4}]}
    status, _expected, observed = d.judge(probe(edit_215(summary_fails), rc=d.RC_NVVS_ERROR), H100)
    assert status == 'fail', observed
    assert observed.startswith("diagnostic: DCGM's test_summary says Fail: The diagnostic plugin exited early "
                               "[error 8, severity TRIAGE]")
    # without warnings in the summary (the GB10 capture's summary has info only), the words say so
    status, _expected, observed = d.judge(probe(edit_215(lambda test: test['test_summary'].update(status='FAIL'))),
                                          H100)
    assert status == 'fail'
    assert observed.startswith("diagnostic: DCGM's test_summary says Fail (no result of the test failed)")


def test_test_summary_warn_warns():
    status, _expected, observed = d.judge(probe(edit_215(lambda test: test['test_summary'].update(status='Warn'))),
                                          H100)
    assert status == 'warn'
    assert observed.startswith("diagnostic: DCGM's test_summary says Warn")


def test_a_test_with_results_for_one_of_two_gpus_fails():
    # the real test object cut to the result of GPU 0 on a node whose nvidia-smi lists two GPUs: GPU 1 not proven
    one = edit_215(lambda test: test.update(results=test['results'][:1]))
    status, _expected, observed = d.judge(probe(one, discovery=''), H100[:2])
    assert status == 'fail', observed
    assert observed.startswith('diagnostic: no result for GPU 1 (00000000:5D:00.0) (results for 1 of 2 GPUs)')
    # all 8 GPUs of the capture, GPU 7's result gone: DCGM's discovery names the GPUs the document lacks
    eight = [{'index': i, 'pci_bus_id': '00000000:{0:02X}:00.0'.format(0x18 + 0x10 * i)} for i in range(8)]
    status, _expected, observed = d.judge(probe(edit_215(lambda test: test['results'].pop()), discovery=''), eight)
    assert status == 'fail'
    assert observed.startswith('diagnostic: no result for GPU 7 (00000000:88:00.0) (results for 7 of 8 GPUs)')


def test_every_test_skipped_is_not_a_pass():
    def skip_all(test):
        for result in test['results']:
            result['status'] = 'Skip'
        test['test_summary'] = {'status': 'Skip'}
    status, _expected, observed = d.judge(probe(edit_215(skip_all)), H100)
    assert status == 'fail', observed
    assert observed.startswith('every test was skipped or not run (8 results: diagnostic): the diagnostic proved '
                               'nothing')

    # some skipped, some passed: still a pass, counted
    def skip_one(test):
        test['results'][2]['status'] = 'Skip'
    status, _expected, observed = d.judge(probe(edit_215(skip_one)), H100)
    assert status == 'pass'
    assert observed.endswith('all passed (1 skipped or not run)')


def test_gb10_summary_fail_is_not_reported_twice():
    status, _expected, observed = d.judge(probe(GB10, rc=d.RC_NVVS_ERROR, discovery=''), [
        {'index': 0, 'pci_bus_id': '0000000F:01:00.0'}])
    assert status == 'fail'
    assert "test_summary" not in observed


@pytest.mark.parametrize('depth', [33, 5000, 200000])
def test_deeply_nested_json_is_refused_with_a_clear_error(depth):
    # json.loads raises RecursionError (not ValueError) near 1,000 levels: readiness crashed on such output
    text = '{"DCGM Diagnostic": {"test_categories": ' + '[' * depth + ']' * depth + '}}'
    status, _expected, observed = d.judge(probe(text, rc=255), H100)
    assert status == 'fail'
    assert observed.startswith('dcgmi diag -r 1 failed (rc=255): the output of dcgmi diag nests deeper than 32 '
                               'levels (DCGM\'s own nest about 10): not a diagnostic document')
    with pytest.raises(_dcgmi.DcgmError):
        _dcgmi.parse_diag(text)


def test_json_depth_of_the_captures():
    assert _dcgmi.json_depth(GB10) == 10
    assert _dcgmi.json_depth('{"a": "[[[{{{", "b": "\\"[["}') == 1


def test_gb10_persistence_off_fails_and_says_so():
    status, _expected, observed = d.judge(probe(GB10, rc=d.RC_NVVS_ERROR, discovery=''), [
        {'index': 0, 'pci_bus_id': '0000000F:01:00.0'}])
    assert status == 'fail'
    assert observed.startswith('persistence mode is off (GPU 0 (0000000F:01:00.0)): DCGM\'s level-1 software test '
                               'fails every GPU whose persistence mode is off (severity CONFIG)')
    assert ('GPU 0 (0000000F:01:00.0): software failed: Persistence Mode: Persistence mode for GPU 0 is disabled. '
            'Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " as root. [error 29, severity CONFIG]'
            in observed)
    assert 'DCGM 4.2.3: 1 result of software' in observed


def test_a_test_failing_on_one_gpu_names_that_gpu_and_test():
    status, _expected, observed = d.judge(probe(wrap_215('Fail'), rc=d.RC_ISOLATE), H100)
    assert status == 'fail'
    assert observed.startswith('GPU 3 (00000000:DC:00.0): diagnostic failed: GPU 3 failed its diagnostic '
                               '[error 61, severity ISOLATE]')
    assert 'persistence' not in observed
    assert 'DCGM sees 4 GPUs' in observed


def test_all_passing_passes():
    status, _expected, observed = d.judge(probe(wrap_215()), H100)
    assert status == 'pass'
    assert observed == 'DCGM 4.1.1: 8 results of diagnostic (DCGM sees 4 GPUs); all passed'


def test_warn_is_a_warning():
    status, _expected, observed = d.judge(probe(wrap_215('Warn')), H100)
    assert status == 'warn'
    assert observed.startswith('GPU 3 (00000000:DC:00.0): diagnostic warned: GPU 3 failed its diagnostic')


def test_an_unknown_status_is_not_a_pass():
    status, _expected, observed = d.judge(probe(wrap_215('Inconclusive')), H100)
    assert status == 'fail'
    assert "diagnostic status 'Inconclusive'" in observed


def test_schema_built_3x_persistence_names_the_gpu():
    status, _expected, observed = d.judge(probe(SCHEMA_BUILT_3X_PERSISTENCE_OFF, rc=d.RC_NVVS_ERROR), H100)
    assert status == 'fail'
    assert observed.startswith('persistence mode is off (GPU 1 (00000000:5D:00.0))')
    assert 'GPU 1 (00000000:5D:00.0): Persistence Mode failed: Persistence mode for GPU 1 is disabled.' in observed


def test_schema_built_3x_pcie():
    status, _expected, observed = d.judge(probe(SCHEMA_BUILT_3X_PCIE, rc=d.RC_NVVS_ERROR), H100)
    assert status == 'fail'
    assert observed.startswith('GPU 1 (00000000:5D:00.0): PCIe failed: GPU 1 has a PCIe link width of 8, which is '
                               'lower than the expected 16 [error 53, severity ISOLATE]')
    assert 'DCGM 3.3.9' in observed


def test_dcgm_sees_fewer_gpus_than_nvidia_smi():
    status, _expected, observed = d.judge(probe(wrap_215()), H100 + [{'index': 4, 'pci_bus_id': '00000000:E0:00.0'}])
    assert status == 'fail'
    assert observed.startswith('DCGM sees 4 GPUs, nvidia-smi lists 5')


def test_timeout_fails_with_the_setting():
    the_probe = probe('')
    the_probe['diag']['timed_out'] = True
    the_probe['diag']['rc'] = 124
    status, _expected, observed = d.judge(the_probe, H100)
    assert status == 'fail'
    assert observed.startswith('dcgmi diag -r 1 did not finish within 300 s (nodeprep_readiness_dcgm_timeout)')


def test_garbage_fails_with_what_dcgmi_printed():
    the_probe = probe('Error: the requested test level is not valid', rc=255)
    status, _expected, observed = d.judge(the_probe, H100)
    assert status == 'fail'
    assert observed.startswith('dcgmi diag -r 1 failed (rc=255): no JSON document in the output of dcgmi diag; it '
                               'printed: Error: the requested test level is not valid')


def test_runtime_error_fails():
    doc = json.dumps({'DCGM Diagnostic': {'runtime_error': 'Unable to create a CUDA context on GPU 0'}})
    status, _expected, observed = d.judge(probe(doc, rc=d.RC_NVVS_ERROR), H100)
    assert status == 'fail'
    assert observed.startswith('DCGM could not run the diagnostic: Unable to create a CUDA context on GPU 0')


def test_no_results_fails():
    doc = json.dumps({'DCGM Diagnostic': {'test_categories': []}})
    status, _expected, observed = d.judge(probe(doc), H100)
    assert status == 'fail'
    assert 'reported no test result' in observed
