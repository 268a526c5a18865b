# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/plugin_utils/_readiness_report.py: the controller-side report built from evaluate() results."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import xml.etree.ElementTree as ET

from html.parser import HTMLParser

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness as r
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_report as rr

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F  # noqa: E402


def _report():
    converged = F.converged()
    fresh = F.fresh()
    results = {
        'gpu-a01': {'checks': F.evaluate(*converged), 'values': F.checked_values(*converged)},
        'gpu-a02': {'checks': F.evaluate(*fresh), 'values': F.checked_values(*fresh)},
        'gpu-a03': {'unreachable': True, 'msg': 'Failed to connect to the host via ssh: No route to host'},
        'gpu-a05': {'failed': True, 'msg': 'Gather the node facts: nvidia-smi timed out <after 60 s> & gave up'},
    }
    return rr.build_report(['gpu-a01', 'gpu-a02', 'gpu-a03', 'gpu-a04', 'gpu-a05'], results, '2026-01-05T08:00:00Z')


def test_build_report_summary_and_hosts():
    report = _report()
    assert report['summary'] == {'hosts': 5, 'ready': 1, 'not_ready': 2, 'unreachable': 2,
                                 'pass': 30, 'warn': 0, 'fail': 30, 'skip': 3}
    assert report['host_order'] == ['gpu-a01', 'gpu-a02', 'gpu-a03', 'gpu-a04', 'gpu-a05']
    assert [report['hosts'][h]['status'] for h in report['host_order']] == \
        ['ready', 'not_ready', 'unreachable', 'unreachable', 'not_ready']
    assert report['hosts']['gpu-a03']['msg'] == 'Failed to connect to the host via ssh: No route to host'
    assert report['hosts']['gpu-a04']['msg'] == 'no result: the host was unreachable or failed before the check'
    assert report['hosts']['gpu-a05']['checks'] == [{
        'id': 'facts.gather', 'status': 'fail', 'expected': 'facts gathered',
        'observed': 'Gather the node facts: nvidia-smi timed out <after 60 s> & gave up',
        'remedy': 'read the error; run playbooks/readiness.yml with -vvv on this host'}]
    assert report['check_ids'] == list(r.CHECK_IDS) + ['facts.gather']


def test_json_junit_html_agree():
    report = _report()
    data = json.loads(rr.render_json(report))
    assert data == json.loads(json.dumps(report))

    # JUnit
    root = ET.fromstring(rr.render_junit(report).encode('utf-8'))
    assert root.tag == 'testsuites'
    assert (root.get('tests'), root.get('failures'), root.get('errors'), root.get('skipped')) == ('65', '30', '2', '3')
    junit = {}
    for suite in root.findall('testsuite'):
        for case in suite.findall('testcase'):
            if case.find('failure') is not None:
                status = 'fail'
            elif case.find('skipped') is not None:
                status = 'skip'
            elif case.find('error') is not None:
                status = 'unreachable'
            elif case.find('system-out') is not None:
                status = 'warn'
            else:
                status = 'pass'
            junit[(suite.get('name'), case.get('name'))] = status
    expected = {}
    for host in data['host_order']:
        entry = data['hosts'][host]
        if entry['status'] == 'unreachable':
            expected[(host, 'host.reachable')] = 'unreachable'
        for check in entry['checks']:
            expected[(host, check['id'])] = check['status']
    assert junit == expected
    error = root.find("testsuite[@name='gpu-a03']/testcase/error")
    assert error.get('message') == 'Failed to connect to the host via ssh: No route to host'
    failure = root.find("testsuite[@name='gpu-a05']/testcase[@name='facts.gather']/failure")
    assert failure.get('message') == 'Gather the node facts: nvidia-smi timed out <after 60 s> & gave up'
    assert failure.text.startswith('expected: facts gathered\nobserved: Gather the node facts: nvidia-smi timed out '
                                   '<after 60 s> & gave up\n')

    # HTML: the matrix cells carry the same statuses, the text is escaped and readable back
    class Cells(HTMLParser):
        def __init__(self):
            HTMLParser.__init__(self)
            self.table = None
            self.rows = []
            self.cell = None

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == 'table':
                self.table = attrs.get('id')
            elif tag == 'tr' and self.table == 'matrix':
                self.rows.append([])
            elif tag in ('td', 'th') and self.table == 'matrix':
                self.cell = {'class': attrs.get('class'), 'title': attrs.get('title'), 'text': '',
                             'colspan': attrs.get('colspan')}
                self.rows[-1].append(self.cell)

        def handle_endtag(self, tag):
            if tag == 'table':
                self.table = None
            if tag in ('td', 'th'):
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell['text'] += data

    parser = Cells()
    parser.feed(rr.render_html(report))
    header = [c['title'] or c['text'] for c in parser.rows[0]]
    assert header == ['host', 'status'] + data['check_ids']
    # two lines per header, horizontal: the area, then the check (breakable at '_')
    assert parser.rows[0][2]['text'] == 'kerneldevel_matched'
    # the hosts that need attention first: not ready, unreachable, then ready; inventory order within each
    assert [row[0]['text'] for row in parser.rows[1:]] == ['gpu-a02', 'gpu-a05', 'gpu-a03', 'gpu-a04', 'gpu-a01']
    marks = {'pass': ('p', 'ok'), 'fail': ('f', 'fail'), 'warn': ('w', 'warn'), 'skip': ('s', 'skip')}
    for row in parser.rows[1:]:
        host = row[0]['text']
        entry = data['hosts'][host]
        if entry['status'] == 'unreachable':
            assert [c['text'] for c in row[1:]] == ['unreachable', entry['msg']]
            assert row[2]['colspan'] == str(len(data['check_ids']))
            continue
        assert row[1]['text'] == {'ready': 'ready', 'not_ready': 'not ready'}[entry['status']]
        by_check = dict((c['id'], c) for c in entry['checks'])
        for cell, check_id in zip(row[2:], data['check_ids']):
            check = by_check.get(check_id)
            if check is None:
                assert (cell['class'], cell['text'], cell['title']) == ('n', '-', 'not run')
            else:
                assert (cell['class'], cell['text']) == marks[check['status']]
                assert cell['title'] == (None if check['status'] == 'pass' else check['observed'])
    page = rr.render_html(report)
    assert '<after 60 s> &' not in page
    assert 'nvidia-smi timed out &lt;after 60 s&gt; &amp; gave up' in page
    # every host has its row's anchor, linked from the row itself; the hosts that need attention have a section
    for host in data['host_order']:
        assert '<tr id="host-{0}" '.format(host) in page
        assert '<a href="#host-{0}">{0}</a>'.format(host) in page
        assert ('<section id="detail-{0}">'.format(host) in page) == (host != 'gpu-a01')
    label, text = data['hosts']['gpu-a02']['values'][0]
    assert '<tr><td>{0}</td><td>{1}</td></tr>'.format(rr._escape(label), rr._escape(text)) in page


def test_render_text_lists_values_and_problems():
    text = rr.render_text(_report())
    assert '== gpu-a01: ready\n' in text
    assert '   power limit              700 W = 70% of the default 1000 W (range 200-1000 W) on 8 GPUs\n' in text
    assert ('   FAIL gpu.power_limit: could not be read: nvidia-smi failed: nvidia-smi not found; from what was read: '
            '/etc/systemd/system/multi-user.target.wants/nodeprep-gpu-settings.service: missing (the settings are '
            'lost at the next reboot)\n') in text
    assert '== gpu-a03: unreachable\n   Failed to connect to the host via ssh: No route to host\n' in text


def test_render_matrix():
    text = rr.render_matrix(_report())
    lines = text.splitlines()
    assert lines[0].startswith('checks: 1=kernel.devel_matched  2=driver.nouveau_blacklisted  ')
    assert lines[2] == 'gpu-a01  ' + ' '.join(['{0:>2}'.format('.')] * 27 + [' -'] + ['{0:>2}'.format('.')] * 3 + ['  ']) + '  ready'
    assert lines[3] == 'gpu-a02  ' + ' '.join('{0:>2}'.format(m) for m in 'F' * 23 + '-FFF-FFF ') + '  not_ready'
    assert lines[4] == 'gpu-a03  ' + ' '.join([' ?'] * 32) + '  unreachable'
    assert lines[6] == 'gpu-a05  ' + ' '.join(['  '] * 31 + [' F']) + '  not_ready'
    assert lines[-1] == ('legend: . pass  W warn  F fail  - skip  ? unreachable; hosts 5: 1 ready, 2 not ready, '
                         '2 unreachable')


def test_a_node_stopped_at_the_whole_step_limit_names_it():
    """Ansible's task timeout (nodeprep_gather_timeout) ended the node's readiness task: facts.gather fails saying
    which limit passed and the variable that sets it; any other failure keeps its message as it is."""
    stopped = {'failed': True, 'msg': 'The task timed out.', 'timedout': {'period': 30}}
    other = {'failed': True, 'msg': 'gpu_node_facts: bad option'}
    report = rr.build_report(['a', 'b'], {'a': stopped, 'b': other}, '2026-12-06T03:00:00Z')
    assert report['hosts']['a']['checks'][0]['observed'] == (
        'The task timed out. (the limit of the whole step passed: 30 s, nodeprep_gather_timeout)')
    assert report['hosts']['b']['checks'][0]['observed'] == 'gpu_node_facts: bad option'
    assert rr.step_limit_words({'timedout': {}}) == '' and rr.step_limit_words(None) == ''


def test_junit_is_well_formed_with_control_characters():
    # a host name and texts holding characters XML 1.0 forbids (C0 controls, U+FFFE, a lone surrogate): before, the
    # raw characters went into junit.xml and no XML parser read it
    host = 'gpu-a01\x1b[31m'
    converged = F.converged()
    checks = F.evaluate(*converged)
    checks[0] = dict(checks[0], status='fail', observed='dmesg said \x00\x07 and \ufffe\ud800 then tab\tend')
    report = rr.build_report([host, 'gpu\x0b02'], {host: {'checks': checks},
                                                   'gpu\x0b02': {'unreachable': True, 'msg': 'ssh: \x01bad'}},
                             '2026-01-05T08:00:00Z')
    text = rr.render_junit(report)
    root = ET.fromstring(text.encode('utf-8'))
    suites = [s.get('name') for s in root.findall('testsuite')]
    assert suites == ['gpu-a01\\x1b[31m', 'gpu\\x0b02']
    failure = root.find("testsuite[@name='gpu-a01\\x1b[31m']/testcase/failure")
    assert failure.get('message') == 'dmesg said \\x00\\x07 and \\ufffe\\ud800 then tab\tend'
    assert root.find("testsuite[@name='gpu\\x0b02']/testcase/error").get('message') == 'ssh: \\x01bad'
    # the HTML page carries the same visible escapes
    assert 'gpu-a01\\x1b[31m' in rr.render_html(report)
    assert rr.xml_chars('ok \t\n\r \u00e9 \U0001f600') == 'ok \t\n\r \u00e9 \U0001f600'


def test_a_report_over_no_host_is_not_ready():
    report = rr.build_report([], {}, '2026-01-05T08:00:00Z')
    assert report['exit_status'] == rr.EXIT_NOT_CHECKED
    assert rr.is_ready(report) is False
    assert rr.exit_meaning(report) == rr.NO_HOST == 'no host was judged (the play had no host): not ready'
    root = ET.fromstring(rr.render_junit(report).encode('utf-8'))
    assert (root.get('tests'), root.get('errors')) == ('1', '1')
    error = root.find("testsuite[@name='readiness']/testcase[@name='hosts.judged']/error")
    assert error.get('message') == rr.NO_HOST
    assert rr.render_matrix(report).splitlines()[-1] == rr.NO_HOST
    html = rr.render_html(report)
    assert rr.NO_HOST in html
    assert 'Passed on every host checked' not in html
    assert 'nodeprep_readiness_exit_status 2\n' in rr.render_prometheus(report)
    assert rr.render_exit_status(report) == '2\n'


def test_a_ready_fleet_is_ready():
    report = rr.build_report(['gpu-a01'], {'gpu-a01': {'checks': F.evaluate(*F.converged())}}, '2026-01-05T08:00:00Z')
    assert rr.is_ready(report) is True
    assert rr.exit_meaning(report) == 'every host checked and ready'
