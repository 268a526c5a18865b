# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the readiness report at fleet size: report.html's order, counts, anchors, escaping and size per host,
readiness.prom against the text exposition format's rules, and the exit status."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import re

from html.parser import HTMLParser

import pytest

from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_report as rr

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness_textfile
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.plugin_utils import report_fleet as RF
from ansible_collections.gpufleet.nodeprep.tests.unit.prometheus_format import parse_exposition

RANK = {'fail': 0, 'unreachable': 1, 'warn': 2, 'pass': 3}


@pytest.fixture(scope='module')
def variants():
    return RF.variants()


@pytest.fixture(scope='module')
def fleet():
    return RF.fleet(500)


class Page(HTMLParser):
    """The parts of report.html the tests read: every element's id, the rows of #matrix and #checks, the text of
    #summary, and the text of the whole page."""

    def __init__(self, page):
        HTMLParser.__init__(self)
        self.ids = []
        self.tables = {'matrix': [], 'checks': []}
        self.table = None
        self.cell = None
        self.summary = None
        self.text = []
        self.hidden = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if 'id' in attrs:
            self.ids.append(attrs['id'])
        if 'hidden' in attrs:
            self.hidden.append(attrs.get('id'))
        if attrs.get('id') == 'summary':
            self.summary = ''
        if tag == 'table' and attrs.get('id') in self.tables:
            self.table = attrs['id']
        elif tag == 'tr' and self.table:
            self.tables[self.table].append({'id': attrs.get('id'), 'class': attrs.get('class'), 'cells': []})
        elif tag in ('td', 'th') and self.table:
            self.cell = {'class': attrs.get('class'), 'title': attrs.get('title'), 'text': ''}
            self.tables[self.table][-1]['cells'].append(self.cell)

    def handle_endtag(self, tag):
        if tag == 'table':
            self.table = None
        elif tag in ('td', 'th'):
            self.cell = None
        elif tag == 'p' and self.summary is not None and not isinstance(self.summary, tuple):
            self.summary = (self.summary,)

    def handle_data(self, data):
        self.text.append(data)
        if self.cell is not None:
            self.cell['text'] += data
        if isinstance(self.summary, str):
            self.summary += data


def _state(report, host):
    return rr.host_state(report['hosts'][host])


def test_failing_hosts_first_in_the_html_itself(fleet):
    """The order is in the HTML (no script needed): not ready, unreachable, warnings, ready; inventory order within
    each state."""
    page = Page(rr.render_html(fleet))
    rows = page.tables['matrix'][1:]
    hosts = [row['cells'][0]['text'] for row in rows]
    assert sorted(hosts) == sorted(fleet['host_order'])
    ranks = [RANK[_state(fleet, host)] for host in hosts]
    assert ranks == sorted(ranks)
    assert set(ranks) == {0, 1, 2, 3}  # the generated fleet has hosts in every state
    for state in RANK:
        inventory = [h for h in fleet['host_order'] if _state(fleet, h) == state]
        assert [h for h in hosts if _state(fleet, h) == state] == inventory
    assert [row['class'] for row in rows] == ['h' + rr._STATE_CLASS[_state(fleet, h)] for h in hosts]
    # the filters are in a form the script shows: hidden without it, and nothing else is
    assert page.hidden == ['filters']
    assert '<script src' not in rr.render_html(fleet) and 'http' not in rr.render_html(fleet)


def test_counts_per_state_and_per_check(fleet):
    page = Page(rr.render_html(fleet))
    states = [_state(fleet, h) for h in fleet['host_order']]
    summary = page.summary[0]
    for state, word in (('fail', 'not ready'), ('unreachable', 'unreachable'), ('warn', 'ready, warnings'),
                        ('pass', 'ready')):
        assert ' {0} {1} '.format(states.count(state), word) in summary + ' '
    assert 'exit status 2' in summary
    # by_check counts every host's checks again, independently
    for check_id in fleet['check_ids']:
        statuses = [c['status'] for h in fleet['host_order'] for c in fleet['hosts'][h]['checks']
                    if c['id'] == check_id]
        row = fleet['by_check'][check_id]
        names = ('pass', 'warn', 'fail', 'skip')
        assert [row[s] for s in names] == [statuses.count(s) for s in names]
        assert row['fail_hosts'] == [h for h in fleet['host_order'] for c in fleet['hosts'][h]['checks']
                                     if c['id'] == check_id and c['status'] == 'fail']
    # the checks table: the checks that failed or warned, most failures first, with their counts and hosts
    rows = page.tables['checks'][1:]
    shown = [row['cells'][0]['text'] for row in rows]
    expected = [c for c in fleet['check_ids'] if fleet['by_check'][c]['fail'] or fleet['by_check'][c]['warn']
                or fleet['by_check'][c]['skip']]
    assert sorted(shown) == sorted(expected)
    fails = [fleet['by_check'][c]['fail'] for c in shown]
    assert fails == sorted(fails, reverse=True)
    for row in rows:
        check = fleet['by_check'][row['cells'][0]['text']]
        counts = [check['fail'], check['warn'], check['skip'], check['pass']]
        assert [int(c['text']) for c in row['cells'][1:5]] == counts
        named = check['fail_hosts'][:rr.SUMMARY_HOSTS]
        text = row['cells'][5]['text']
        assert text.split(' and ')[0].split(', ') == (named or [''])
        if len(check['fail_hosts']) > rr.SUMMARY_HOSTS:
            assert text.endswith(' and {0} more'.format(len(check['fail_hosts']) - rr.SUMMARY_HOSTS))
    # every check failed somewhere in the generated fleet (its freshly provisioned hosts fail them all)
    assert expected == fleet['check_ids'] and 'Passed on every' not in ''.join(page.text)
    # in the 4-node report most checks passed everywhere: one line names them
    four = RF.four_nodes()
    text = ''.join(Page(rr.render_html(four)).text)
    # imex.domain skips on these HGX nodes (no IMEX domain configured): not a pass.
    clean = [c for c in four['check_ids'] if c not in ('gpu.count', 'gpu.health', 'imex.domain')]
    assert 'Passed on every host checked ({0}): {1}\n'.format(len(clean), ', '.join(clean)) in text


@pytest.mark.parametrize('host, anchor', [
    ('gpu-a01', 'host-gpu-a01'),
    ('gpu-a01.cluster.example.org', 'host-gpu-a01.cluster.example.org'),
    ('gpu_a01', 'host-gpu_a01'),
    ('gpu a01', 'host-gpu~20a01'),
    ('gpu~20a01', 'host-gpu~7e20a01'),
    ('<b>"x"&\'', 'host-~3cb~3e~22x~22~26~27'),
    (u'gpu-\u00e9', 'host-gpu-~c3~a9'),
    ('10.0.0.1:2222', 'host-10.0.0.1~3a2222'),
])
def test_anchor_is_stable_unique_and_url_safe(host, anchor):
    assert rr.anchor(host) == anchor
    assert re.match(r'^host-[A-Za-z0-9._~-]+$', rr.anchor(host))


def test_anchors_of_distinct_names_differ():
    names = ['a b', 'a_b', 'a~20b', 'a.b', 'a-b', 'a~5fb', 'a\u00a0b', 'A b']
    assert len(set(rr.anchor(n) for n in names)) == len(names)


def test_host_names_and_messages_are_escaped(variants):
    evil = '<img src=x onerror="alert(1)">&\'gpu'
    checks = copy.deepcopy(variants['gpu_lost']['checks'])
    failed = [c for c in checks if c['status'] == 'fail'][0]
    failed['observed'] = 'seen <script>alert("x")</script> & \'quoted\''
    results = {evil: {'checks': checks, 'values': [['a<b', 'c&d "e"']]},
               'ok': variants['converged'],
               'gone"<>': {'unreachable': True, 'msg': 'ssh: <no route> & "refused"'}}
    report = rr.build_report([evil, 'ok', 'gone"<>'], results, '2026-01-05T08:00:00Z')
    html = rr.render_html(report)
    assert '<img' not in html and '<script>alert' not in html and '<no route>' not in html
    page = Page(html)
    text = ''.join(page.text)
    assert evil in text and 'ssh: <no route> & "refused"' in text and 'c&d "e"' in text
    rows = page.tables['matrix'][1:]
    assert [r['cells'][0]['text'] for r in rows] == [evil, 'gone"<>', 'ok']
    assert [r['id'] for r in rows] == [rr.anchor(evil), rr.anchor('gone"<>'), 'host-ok']
    titles = [c['title'] for c in rows[0]['cells'] if c['title']]
    assert 'seen <script>alert("x")</script> & \'quoted\'' in titles
    assert len(page.ids) == len(set(page.ids))


def _size(report):
    return len(rr.render_html(report).encode('utf-8'))


def test_size_per_host(variants, fleet):
    """A host that passes everything adds less than 1.5 kB (measured: about 0.45 kB); the generated 500-node
    fleet, 12% of it needing attention, stays under 48 bytes per host and check column (1 kB per host at 21 checks,
    where it measured about 0.7 kB; about 39 bytes per cell at 28 checks)."""
    def passing(count):
        hosts = ['gpu-r{0:02d}n{1:02d}'.format(i // 20 + 1, i % 20 + 1) for i in range(count)]
        return rr.build_report(hosts, dict((h, variants['converged']) for h in hosts), '2026-01-05T08:00:00Z')
    per_host = (_size(passing(101)) - _size(passing(1))) / 100.0
    assert per_host < 1500
    columns = len(fleet['check_ids'])
    assert columns >= 21
    assert _size(fleet) / (500.0 * columns) < 48


# ---------------------------------------------------------------------------
# readiness.prom: the rules of https://prometheus.io/docs/instrumenting/exposition_formats/ (text format details)
# and of https://prometheus.io/docs/concepts/data_model/ (metric and label names), checked line by line.

def test_prometheus_textfile_follows_the_exposition_format(fleet):
    families = parse_exposition(rr.render_prometheus(fleet))
    assert sorted(families) == sorted(name for name, _help in rr.PROMETHEUS_FAMILIES)
    assert all(f['type'] == 'gauge' and f['help'] for f in families.values())
    # per check and status: how many hosts, counted here from the report's hosts (not from by_check)
    checks = families['nodeprep_readiness_checks']['samples']
    assert [(lab['check'], lab['status']) for lab, _v in checks] == [
        (check_id, status) for check_id in fleet['check_ids'] for status in ('pass', 'warn', 'fail', 'skip')]
    for lab, value in checks:
        assert value == sum(1 for h in fleet['host_order'] for c in fleet['hosts'][h]['checks']
                            if c['id'] == lab['check'] and c['status'] == lab['status'])
    hosts = dict((lab['state'], v) for lab, v in families['nodeprep_readiness_hosts']['samples'])
    assert hosts == dict((state, float(sum(1 for h in fleet['host_order'] if fleet['hosts'][h]['status'] == state)))
                         for state in ('ready', 'not_ready', 'unreachable'))
    assert sum(hosts.values()) == len(fleet['host_order']) == 500
    assert families['nodeprep_readiness_hosts_not_checked']['samples'] == [({}, float(sum(
        1 for h in fleet['host_order'] if rr.not_checked(fleet['hosts'][h]))))]
    assert families['nodeprep_readiness_exit_status']['samples'] == [({}, 2.0)]
    # 2026-01-05T08:00:00Z
    assert families['nodeprep_readiness_last_run_timestamp_seconds']['samples'] == [({}, 1767600000.0)]
    # no host names: per-host detail is each node's own textfile
    assert 'host=' not in rr.render_prometheus(fleet)


@pytest.mark.parametrize('count', [1, 10, 500])
def test_prometheus_series_bounded_by_checks_not_nodes(variants, count):
    """readiness.prom holds 4 series per check and 6 more, whatever the number of hosts."""
    hosts = ['gpu-{0:04d}'.format(i) for i in range(count)]
    report = rr.build_report(hosts, dict((h, variants['gpu_lost'] if i % 3 else variants['converged'])
                                         for i, h in enumerate(hosts)), '2026-01-05T08:00:00Z')
    text = rr.render_prometheus(report)
    series = [line for line in text.splitlines() if not line.startswith('#')]
    assert len(series) == 4 * len(report['check_ids']) + 6


def test_prometheus_client_parses_the_same(fleet, variants):
    """A second opinion: Prometheus's Python client reads the same families, samples, labels and values."""
    host = 'gpu\\a01 "quoted"\nnext'
    for report in (fleet, rr.build_report([host], {host: variants['gpu_lost']}, '2026-01-05T08:00:00Z')):
        text = rr.render_prometheus(report)
        ours = parse_exposition(text)
        theirs = dict((family.name, family) for family in text_string_to_metric_families(text))
        assert sorted(theirs) == sorted(ours)
        for name, family in theirs.items():
            assert family.type == 'gauge'
            assert family.documentation == ours[name]['help'].replace('\\n', '\n').replace('\\\\', '\\')
            assert [(s.name, s.labels, s.value) for s in family.samples] == [
                (name, labels, value) for labels, value in ours[name]['samples']]


@pytest.mark.parametrize('checks', [
    [],
    [{'id': 'gpu.count', 'status': 'pass'}, {'id': 'pci.acs', 'status': 'fail'}, {'id': 'gpu.topology', 'status': 'warn'},
     {'id': 'gpu.dcgm_diag', 'status': 'skip'}, {'id': 'odd\\"id"\n', 'status': 'fail'}],
    [{'id': 'check.{0:02d}'.format(i), 'status': 'fail' if i % 2 else 'warn'} for i in range(60)],
])
def test_prometheus_client_reads_the_node_textfile(checks):
    """The node's own textfile (module readiness_textfile) read by Prometheus's Python client as by our reader."""
    text = _readiness_textfile.render_node(checks)
    ours = parse_exposition(text)
    theirs = dict((family.name, family) for family in text_string_to_metric_families(text))
    assert sorted(theirs) == sorted(ours)
    for name, family in theirs.items():
        assert family.type == 'gauge'
        assert family.documentation == ours[name]['help']
        assert [(s.name, s.labels, s.value) for s in family.samples] == [
            (name, labels, value) for labels, value in ours[name]['samples']]
    assert sum(len(family.samples) for family in theirs.values()) <= 25


def test_prometheus_label_values_are_escaped(variants):
    host = 'gpu\\a01 "quoted"\nnext'
    report = rr.build_report([host, 'gpu-a02'], {host: variants['gpu_lost'], 'gpu-a02': variants['gather_failed']},
                             'not a time')
    # a check id with the three characters the format escapes (ids come from results, so any text may arrive)
    report['check_ids'].append('odd\\"id"\n')
    text = rr.render_prometheus(report)
    assert 'check="odd\\\\\\"id\\"\\n"' in text
    families = parse_exposition(text)
    assert ({'check': 'odd\\"id"\n', 'status': 'pass'}, 0.0) in families['nodeprep_readiness_checks']['samples']
    # a gather failure: its facts.gather check fails, and the host counts as not checked
    assert ({'check': 'facts.gather', 'status': 'fail'}, 1.0) in families['nodeprep_readiness_checks']['samples']
    assert families['nodeprep_readiness_hosts_not_checked']['samples'] == [({}, 1.0)]
    # no time that can be read: no timestamp sample, and so no HELP/TYPE for it either
    assert 'nodeprep_readiness_last_run_timestamp_seconds' not in families
    assert rr.prometheus_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'


@pytest.mark.parametrize('bad', [
    '# HELP m x\n# TYPE m gauge\nm 1',                                 # no trailing line feed
    '# TYPE m gauge\n# TYPE m gauge\nm 1\n',                           # two TYPE lines
    '# TYPE m gauge\nm 1\n# HELP m x\n',                               # HELP after the samples
    'm 1\n',                                                           # sample without TYPE
    '# TYPE m gauge\nm{a="x"} 1\nm{a="x"} 0\n',                        # duplicate series
    '# TYPE m gauge\nm{a="x"y"} 1\n',                                  # unescaped double quote
    '# TYPE m gauge\nm{a="x\\y"} 1\n',                                 # unknown escape
    '# TYPE 1m gauge\n1m 1\n',                                         # metric name
    '# TYPE m gauge\nm{__a="x"} 1\n',                                  # reserved label name
    '# TYPE m gauge\n# TYPE n gauge\nm 1\nn 1\nm{a="b"} 1\n',          # families interleaved
])
def test_the_format_checker_rejects_what_the_rules_forbid(bad):
    with pytest.raises((AssertionError, KeyError, ValueError)):
        parse_exposition(bad)


# ---------------------------------------------------------------------------
# the exit status


@pytest.mark.parametrize('hosts, status', [
    (['converged', 'xid_warn'], 0),
    (['converged', 'gro_on'], 1),
    (['converged', 'unreachable'], 2),
    (['converged', 'gather_failed'], 2),
    (['gro_on', 'unreachable'], 2),
    ([], 2),
])
def test_exit_status(variants, hosts, status, tmp_path):
    names = ['gpu-a{0:02d}'.format(i + 1) for i in range(len(hosts))]
    report = rr.build_report(names, dict((n, variants[v]) for n, v in zip(names, hosts)), '2026-01-05T08:00:00Z')
    assert report['exit_status'] == status
    assert rr.render_exit_status(report) == '{0}\n'.format(status)
    assert Page(rr.render_html(report)).summary[0].endswith('exit status {0}'.format(status))
