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

    ``hosts`` lists every host of the play, in order. ``results`` maps a host to what readiness_info returned
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
            out_hosts[host] = {'status': UNREACHABLE, 'msg': str(reason), 'checks': [], 'values': []}
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
                                      for c in checks],
                           'values': [[str(pair[0]), str(pair[1])] for pair in (result.get('values') or [])
                                      if isinstance(pair, (list, tuple)) and len(pair) == 2]}
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
    PASS: ('#14612c', '#e3f2e6'),
    WARN: ('#7a4f00', '#fff1cc'),
    FAIL: ('#a1211a', '#fbe3e1'),
    SKIP: ('#4a4f55', '#eef0f2'),
    UNREACHABLE: ('#ffffff', '#6b2c91'),
}

_CSS = (
    'body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1f2328;'
    'line-height:1.4;max-width:1600px}',
    'h1{font-size:24px;margin:0 0 6px}',
    'h2{font-size:19px;margin:28px 0 8px;padding-top:8px;border-top:2px solid #d0d7de}',
    'h3{font-size:15px;margin:14px 0 6px}',
    '#summary{margin:0 0 16px;font-size:15px}',
    '.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;margin-right:4px}',
    'table{border-collapse:collapse;font-size:13px}',
    'th,td{border:1px solid #c8ced5;padding:4px 7px;vertical-align:top}',
    'th{background:#f3f5f7;font-weight:600}',
    '#matrix th.check{font-size:11.5px;max-width:84px;padding:4px 4px;text-align:center;vertical-align:bottom}',
    '#matrix th.check span{display:block;color:#57606a;font-weight:400}',
    '#matrix td{text-align:center;white-space:nowrap;padding:4px 5px}',
    '#matrix td.host,#matrix td.msg{text-align:left}',
    'td.host{font-weight:600;white-space:nowrap}',
    'td.host a{color:inherit}',
    'table.values td:first-child{white-space:nowrap;color:#57606a;width:14em}',
    'table.values td{max-width:1100px}',
    'table.checks td:first-child{white-space:nowrap;font-family:ui-monospace,Menlo,Consolas,monospace}',
    'table.checks td.status{text-align:center;font-weight:600;white-space:nowrap}',
    'table.checks td{max-width:520px}',
    'details{margin:8px 0}',
    'summary{cursor:pointer;color:#0969da}',
    '.legend{font-size:13px;color:#57606a;margin:6px 0 0}',
)


def _h(text):
    return _escape(text)


def _check_header(check_id):
    """``gpu.power_limit`` as a two-line header: the area small above, the check below, breakable at ``_``."""
    area, _sep, name = check_id.partition('.')
    if not name:
        area, name = '', area
    return '<span>{0}</span>{1}'.format(_h(area), '_<wbr>'.join(_h(part) for part in name.split('_')))


def _anchor(host):
    return 'host-' + ''.join(c if c.isalnum() or c in '-_.' else '_' for c in host)


def _badge(status, text):
    return '<span class="badge {0}">{1}</span>'.format(_h(status), _h(text))


def render_html(report):
    """A self-contained HTML page: a matrix of hosts and checks coloured by status, then one section per host
    with the values that were checked and every check that did not pass (the passing ones folded below)."""
    ids = report['check_ids']
    summary = report['summary']
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           '<title>gpufleet.nodeprep readiness report</title>', '<style>']
    out.extend(_CSS)
    for status, (fg, bg) in sorted(_HTML_COLOURS.items()):
        out.append('.{0}{{color:{1};background:{2}}}'.format(status, fg, bg))
    out += ['</style>', '</head>', '<body>', '<h1>gpufleet.nodeprep readiness report</h1>']
    line = '<p id="summary">Generated {0} &middot; {1} hosts: {2} {3} {4} &middot; checks: {5} {6} {7} {8}</p>'
    out.append(line.format(
        _h(report['generated']), summary['hosts'], _badge(PASS, '{0} ready'.format(summary['ready'])),
        _badge(FAIL, '{0} not ready'.format(summary['not_ready'])),
        _badge(UNREACHABLE, '{0} unreachable'.format(summary['unreachable'])),
        _badge(PASS, '{0} pass'.format(summary[PASS])), _badge(WARN, '{0} warn'.format(summary[WARN])),
        _badge(FAIL, '{0} fail'.format(summary[FAIL])), _badge(SKIP, '{0} skip'.format(summary[SKIP]))))
    out.append('<table id="matrix">')
    out.append('<tr><th>host</th><th>status</th>' + ''.join(
        '<th class="check" title="{0}">{1}</th>'.format(_h(check_id), _check_header(check_id)) for check_id in ids)
        + '</tr>')
    for host in report['host_order']:
        entry = report['hosts'][host]
        by_id = dict((c['id'], c) for c in entry['checks'])
        row = ['<tr><td class="host"><a href="#{0}">{1}</a></td>'.format(_h(_anchor(host)), _h(host))]
        if entry['status'] == UNREACHABLE:
            row.append('<td class="unreachable" title="{0}">unreachable</td>'.format(_h(entry['msg'])))
            row.append('<td class="unreachable msg" colspan="{0}" title="{1}">{2}</td>'.format(
                len(ids), _h(entry['msg']), _h(entry['msg'])))
        else:
            row.append('<td class="{0}">{1}</td>'.format(_h(entry['worst']), _h(entry['status'].replace('_', ' '))))
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
    out.append('<p class="legend">Hover a cell for what was expected and observed; every host has its section '
               'below.</p>')
    for host in report['host_order']:
        entry = report['hosts'][host]
        colour = UNREACHABLE if entry['status'] == UNREACHABLE else entry.get('worst') or FAIL
        out.append('<h2 id="{0}">{1} {2}</h2>'.format(_h(_anchor(host)), _h(host),
                                                      _badge(colour, entry['status'].replace('_', ' '))))
        if entry['status'] == UNREACHABLE:
            out.append('<p>{0}</p>'.format(_h(entry['msg'])))
            continue
        if entry.get('values'):
            out.append('<h3>Values checked</h3>')
            out.append('<table class="values">')
            for label, text in entry['values']:
                out.append('<tr><td>{0}</td><td>{1}</td></tr>'.format(_h(label), _h(text)))
            out.append('</table>')
        problems = [c for c in entry['checks'] if c['status'] != PASS]
        passing = [c for c in entry['checks'] if c['status'] == PASS]
        if problems:
            out.append('<h3>Checks that did not pass</h3>')
            out.append(_checks_table(problems))
        if passing:
            out.append('<details><summary>{0} checks passed</summary>'.format(len(passing)))
            out.append(_checks_table(passing))
            out.append('</details>')
    out += ['</body>', '</html>']
    return '\n'.join(out) + '\n'


def _checks_table(checks):
    rows = ['<table class="checks">', '<tr><th>check</th><th>status</th><th>expected</th><th>observed</th>'
            '<th>remedy</th></tr>']
    for check in checks:
        rows.append('<tr><td>{0}</td><td class="status {1}">{1}</td><td>{2}</td><td>{3}</td><td>{4}</td></tr>'.format(
            _h(check['id']), _h(check['status']), _h(check['expected']), _h(check['observed']),
            _h(check['remedy'])))
    rows.append('</table>')
    return '\n'.join(rows)


def render_text(report):
    """The plain-text report (report.txt): the matrix, then per host the values checked and what did not pass."""
    lines = [render_matrix(report), '']
    for host in report['host_order']:
        entry = report['hosts'][host]
        lines.append('== {0}: {1}'.format(host, entry['status'].replace('_', ' ')))
        if entry['status'] == UNREACHABLE:
            lines.append('   ' + entry['msg'])
            lines.append('')
            continue
        width = max([len(label) for label, _text in entry.get('values') or []] + [0])
        for label, text in entry.get('values') or []:
            lines.append('   {0}  {1}'.format(label.ljust(width), text))
        for check in entry['checks']:
            if check['status'] == PASS:
                continue
            lines.append('   {0} {1}: {2}'.format(check['status'].upper(), check['id'], check['observed']))
            lines.append('        expected: {0}'.format(check['expected']))
            lines.append('        remedy:   {0}'.format(check['remedy']))
        lines.append('')
    return '\n'.join(lines)


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


FILES = (('report.json', render_json), ('junit.xml', render_junit), ('report.html', render_html),
         ('report.txt', lambda report: render_text(report) + '\n'))
