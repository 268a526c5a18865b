# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
#
# The controller side of readiness: build_report() gathers the per-host results
# of readiness_info into one report, and render_json() / render_junit() /
# render_html() / render_text() / render_matrix() write it. Only the action
# plugin plugins/action/readiness_report.py imports this file, so none of it is
# shipped to the managed nodes (module_utils are). The checks themselves, their
# ids and remedies live in plugins/module_utils/_readiness.py.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._readiness import (
    CHECK_IDS,
    FAIL,
    PASS,
    SKIP,
    STATUSES,
    UNREACHABLE,
    WARN,
    summarize,
)



def build_report(hosts, results, generated, unreachable=None):
    """The report as one dict: ``{generated, summary, check_ids, hosts: {name: {status, msg, checks}}}``.

    ``hosts`` lists every host of the play, in order. ``results`` maps a host to what readiness_check returned
    (``checks``); a host without a result, or whose result says ``unreachable``, is ``unreachable``
    (``unreachable`` may give the reason per host).
    A result with ``failed`` but no checks (the gather failed) becomes a host with one failed ``facts.gather``.
    """
    unreachable = unreachable or {}
    out_hosts = {}
    order = []
    summary = {'hosts': 0, 'ready': 0, 'not_ready': 0, 'unreachable': 0}
    summary.update((status, 0) for status in STATUSES)
    for host in hosts:
        if host in out_hosts:
            continue
        order.append(host)
        summary['hosts'] += 1
        result = results.get(host)
        if not result or host in unreachable or result.get('unreachable'):
            reason = (unreachable.get(host) or (result or {}).get('msg')
                      or 'no result: the host was unreachable or failed before the check')
            out_hosts[host] = {'status': UNREACHABLE, 'msg': str(reason), 'checks': []}
            summary['unreachable'] += 1
            continue
        checks = result.get('checks') or []
        if not checks:
            checks = [{'id': 'facts.gather', 'status': FAIL, 'expected': 'facts gathered',
                       'observed': str(result.get('msg') or 'the check returned nothing'),
                       'remedy': 'read the error; run playbooks/readiness.yml with -vvv on this host'}]
        counts = summarize(checks)
        for status in STATUSES:
            summary[status] += counts[status]
        host_status = 'not_ready' if counts['status'] == FAIL else 'ready'
        summary[host_status] += 1
        out_hosts[host] = {'status': host_status, 'worst': counts['status'], 'msg': '',
                           'checks': [dict((k, c.get(k)) for k in ('id', 'status', 'expected', 'observed', 'remedy'))
                                      for c in checks]}
    check_ids = list(CHECK_IDS)
    for host in order:
        for check in out_hosts[host]['checks']:
            if check['id'] not in check_ids:
                check_ids.append(check['id'])
    return {'generated': generated, 'summary': summary, 'check_ids': check_ids, 'host_order': order,
            'hosts': out_hosts}


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=True) + '\n'


_XML_ESCAPES = (('&', '&amp;'), ('<', '&lt;'), ('>', '&gt;'), ('"', '&quot;'), ("'", '&#x27;'))


def _escape(text):
    """Text safe inside XML/HTML element content and double-quoted attributes."""
    text = str(text if text is not None else '')
    for char, entity in _XML_ESCAPES:
        text = text.replace(char, entity)
    return text


def _xml_quoteattr(text):
    return '"{0}"'.format(_escape(text).replace('\n', '&#10;').replace('\r', '&#13;').replace('\t', '&#9;'))


def _cdata_safe(text):
    return _escape(text)


def render_junit(report):
    """JUnit XML: a testsuite per host, a testcase per check; fail -> <failure>, skip -> <skipped>,
    warn -> passed with <system-out>; an unreachable host -> one errored testcase ``host.reachable``."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>']
    summary = report['summary']
    total = sum(max(1, len(report['hosts'][h]['checks'])) for h in report['host_order'])
    lines.append('<testsuites name="gpufleet.nodeprep readiness" tests="{0}" failures="{1}" errors="{2}" '
                 'skipped="{3}" timestamp={4}>'.format(total, summary[FAIL], summary['unreachable'], summary[SKIP],
                                                       _xml_quoteattr(str(report['generated']))))
    for host in report['host_order']:
        entry = report['hosts'][host]
        if entry['status'] == UNREACHABLE:
            lines.append('  <testsuite name={0} tests="1" failures="0" errors="1" skipped="0">'.format(
                _xml_quoteattr(host)))
            lines.append('    <testcase classname={0} name="host.reachable">'.format(_xml_quoteattr(host)))
            lines.append('      <error type="unreachable" message={0}/>'.format(_xml_quoteattr(entry['msg'])))
            lines.append('    </testcase>')
            lines.append('  </testsuite>')
            continue
        checks = entry['checks']
        counts = summarize(checks)
        lines.append('  <testsuite name={0} tests="{1}" failures="{2}" errors="0" skipped="{3}">'.format(
            _xml_quoteattr(host), len(checks), counts[FAIL], counts[SKIP]))
        for check in checks:
            lines.append('    <testcase classname={0} name={1}>'.format(_xml_quoteattr(host),
                                                                        _xml_quoteattr(check['id'])))
            detail = 'expected: {0}\nobserved: {1}\nremedy: {2}'.format(check['expected'], check['observed'],
                                                                        check['remedy'])
            if check['status'] == FAIL:
                lines.append('      <failure type="fail" message={0}>{1}</failure>'.format(
                    _xml_quoteattr(str(check['observed'])), _cdata_safe(detail)))
            elif check['status'] == SKIP:
                lines.append('      <skipped message={0}/>'.format(_xml_quoteattr(str(check['observed']))))
            elif check['status'] == WARN:
                lines.append('      <system-out>{0}</system-out>'.format(_cdata_safe('WARN\n' + detail)))
            lines.append('    </testcase>')
        lines.append('  </testsuite>')
    lines.append('</testsuites>')
    return '\n'.join(lines) + '\n'


_HTML_COLOURS = {
    PASS: ('#1b7f3b', '#e6f4ea'),
    WARN: ('#8a5a00', '#fff4d6'),
    FAIL: ('#b3261e', '#fde7e6'),
    SKIP: ('#5f6368', '#f1f3f4'),
    UNREACHABLE: ('#ffffff', '#6b2c91'),
}


def _h(text):
    return _escape(text)


def render_html(report):
    """A self-contained HTML page: hosts as rows, check ids as columns, a coloured cell per status with the
    details in its title, then a details section listing every check that is not ``pass``."""
    ids = report['check_ids']
    summary = report['summary']
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           '<title>gpufleet.nodeprep readiness report</title>', '<style>',
           'body{font-family:sans-serif;margin:1.5em;color:#202124}',
           'table{border-collapse:collapse;font-size:13px}',
           'th,td{border:1px solid #c0c4c8;padding:4px 6px;text-align:center}',
           'th.check{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}',
           'td.host{text-align:left;font-weight:bold}']
    for status, (fg, bg) in sorted(_HTML_COLOURS.items()):
        out.append('.{0}{{color:{1};background:{2}}}'.format(status, fg, bg))
    out += ['</style>', '</head>', '<body>', '<h1>gpufleet.nodeprep readiness report</h1>']
    out.append('<p id="summary">Generated {0}. Hosts: {1} ({2} ready, {3} not ready, {4} unreachable). '
               'Checks: {5} pass, {6} warn, {7} fail, {8} skip.</p>'.format(
                   _h(report['generated']), summary['hosts'], summary['ready'], summary['not_ready'],
                   summary['unreachable'], summary[PASS], summary[WARN], summary[FAIL], summary[SKIP]))
    out.append('<table id="matrix">')
    out.append('<tr><th>host</th><th>status</th>' + ''.join(
        '<th class="check">{0}</th>'.format(_h(check_id)) for check_id in ids) + '</tr>')
    for host in report['host_order']:
        entry = report['hosts'][host]
        by_id = dict((c['id'], c) for c in entry['checks'])
        row = ['<tr><td class="host">{0}</td>'.format(_h(host))]
        if entry['status'] == UNREACHABLE:
            row.append('<td class="unreachable" title="{0}">unreachable</td>'.format(_h(entry['msg'])))
            row.append('<td class="unreachable" colspan="{0}" title="{1}">unreachable</td>'.format(
                len(ids), _h(entry['msg'])))
        else:
            row.append('<td class="{0}">{1}</td>'.format(_h(entry['worst']), _h(entry['status'])))
            for check_id in ids:
                check = by_id.get(check_id)
                if check is None:
                    row.append('<td class="skip" title="not run">-</td>')
                    continue
                title = 'expected: {0}\nobserved: {1}\nremedy: {2}'.format(
                    check['expected'], check['observed'], check['remedy'])
                row.append('<td class="{0}" title="{1}">{2}</td>'.format(
                    _h(check['status']), _h(title), _h(check['status'])))
        row.append('</tr>')
        out.append(''.join(row))
    out.append('</table>')
    out.append('<h2>Details</h2>')
    out.append('<table id="details">')
    out.append('<tr><th>host</th><th>check</th><th>status</th><th>expected</th><th>observed</th>'
               '<th>remedy</th></tr>')
    for host in report['host_order']:
        entry = report['hosts'][host]
        if entry['status'] == UNREACHABLE:
            out.append('<tr><td class="host">{0}</td><td>host.reachable</td><td class="unreachable">unreachable</td>'
                       '<td>reachable over SSH</td><td>{1}</td><td>check the node and the connection</td></tr>'.format(
                           _h(host), _h(entry['msg'])))
            continue
        for check in entry['checks']:
            if check['status'] == PASS:
                continue
            out.append('<tr><td class="host">{0}</td><td>{1}</td><td class="{2}">{2}</td><td>{3}</td><td>{4}</td>'
                       '<td>{5}</td></tr>'.format(_h(host), _h(check['id']), _h(check['status']),
                                                  _h(check['expected']), _h(check['observed']),
                                                  _h(check['remedy'])))
    out += ['</table>', '</body>', '</html>']
    return '\n'.join(out) + '\n'


_MATRIX_MARKS = {PASS: '.', WARN: 'W', FAIL: 'F', SKIP: '-', None: ' '}


def render_matrix(report):
    """A compact text matrix for the end of the run: one line per host, one column per check."""
    ids = report['check_ids']
    width = max([len(h) for h in report['host_order']] + [4])
    lines = ['checks: ' + '  '.join('{0}={1}'.format(i + 1, check_id) for i, check_id in enumerate(ids))]
    lines.append('{0}  {1}  {2}'.format('host'.ljust(width), ' '.join('{0:>2}'.format(i + 1)
                                                                      for i in range(len(ids))), 'status'))
    for host in report['host_order']:
        entry = report['hosts'][host]
        if entry['status'] == UNREACHABLE:
            cells = ' '.join(' ?' for dummy in ids)
        else:
            by_id = dict((c['id'], c['status']) for c in entry['checks'])
            cells = ' '.join('{0:>2}'.format(_MATRIX_MARKS.get(by_id.get(i), '?')) for i in ids)
        lines.append('{0}  {1}  {2}'.format(host.ljust(width), cells, entry['status']))
    summary = report['summary']
    lines.append('legend: . pass  W warn  F fail  - skip  ? unreachable; hosts {0}: {1} ready, {2} not ready, '
                 '{3} unreachable'.format(summary['hosts'], summary['ready'], summary['not_ready'],
                                          summary['unreachable']))
    return '\n'.join(lines)
